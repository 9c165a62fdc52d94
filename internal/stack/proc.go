package stack

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Binaries are the programs a stack or a test runs as processes.
type Binaries struct {
	// Capgate is the capgate binary (`go build ./cmd/capgate`).
	Capgate string
	// Consumer is the fault harness's consumer program
	// (`go build ./e2e/harness/cmd/consumer`); empty when not built.
	Consumer string
}

// Build compiles the capgate binary (and, with consumer, the harness
// consumer) into dir with the go command, from the module containing the
// working directory.
func Build(dir string, consumer bool) (Binaries, error) {
	b := Binaries{Capgate: filepath.Join(dir, "capgate")}
	if err := compile("./cmd/capgate", b.Capgate); err != nil {
		return Binaries{}, err
	}
	if consumer {
		b.Consumer = filepath.Join(dir, "consumer")
		if err := compile("./e2e/harness/cmd/consumer", b.Consumer); err != nil {
			return Binaries{}, err
		}
	}
	return b, nil
}

// compile runs go build -o out pkg in the module root.
func compile(pkg, out string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("stack: go build %s: %w\n%s", pkg, err, output)
	}
	return nil
}

// built is what BuildOnce compiled in this process: package → binary.
var built struct {
	mu   sync.Mutex
	dir  string
	bins map[string]string
	errs map[string]error
}

// BuildOnce compiles the main package pkg (relative to the module root,
// "./cmd/capgate") the first time it is asked for in this process, into
// a directory of its own, and returns the binary's path; later calls
// return the same path (or the same error). A test binary's suites share
// one build however many stacks they start; RemoveBuilt (TestMain, after
// m.Run) deletes them.
func BuildOnce(pkg string) (string, error) {
	built.mu.Lock()
	defer built.mu.Unlock()
	if bin, ok := built.bins[pkg]; ok {
		return bin, built.errs[pkg]
	}
	if built.dir == "" {
		dir, err := os.MkdirTemp("", "capgate-bin-")
		if err != nil {
			return "", fmt.Errorf("stack: build %s: %w", pkg, err)
		}
		built.dir, built.bins, built.errs = dir, map[string]string{}, map[string]error{}
	}
	bin := filepath.Join(built.dir, filepath.Base(filepath.Clean(pkg)))
	err := compile(pkg, bin)
	built.bins[pkg], built.errs[pkg] = bin, err
	return bin, err
}

// RemoveBuilt deletes every binary BuildOnce built (running processes
// keep theirs: the file is only unlinked).
func RemoveBuilt() {
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	built.dir, built.bins, built.errs = "", nil, nil
}

// ModuleRoot is the nearest directory at or above the working directory
// holding a go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("stack: module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("stack: module root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// SignalsSupported reports whether processes can be killed, stopped and
// continued here, and why not.
func SignalsSupported() (bool, string) {
	switch runtime.GOOS {
	case "linux", "darwin", "freebsd":
		return true, ""
	}
	return false, "kill -9 and SIGSTOP need a Unix, running on " + runtime.GOOS
}

// Process is a program run by a stack or a test: its stdout and stderr
// lines go to callbacks, the last stderr lines are kept for failure
// messages. Safe for concurrent use.
type Process struct {
	Name string
	cmd  *exec.Cmd

	exited  chan struct{}
	waitErr error
	readers sync.WaitGroup

	mu    sync.Mutex
	tail  []string // last stderr lines
	crash []string // a Go crash's first stderr lines ("panic: …", "fatal error: …")
}

// crashHeadLines is how much of a Go crash's report is kept: its message
// and the failing goroutine's stack come first, and the last 40 lines of
// a dump of every goroutine are some idle goroutine's frames — an e2e/ha
// replica that exited with status 2 left no clue what panicked (chaos8).
const crashHeadLines = 60

// StartProcess starts bin with args and env; onStdout and onStderr (may
// be nil) receive each line. The caller stops it.
func StartProcess(name, bin string, args, env []string, onStdout, onStderr func([]byte)) (*Process, error) {
	p := &Process{Name: name, cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.cmd.Env = env
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("stack: start %s: %w", name, err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("stack: start %s: %w", name, err)
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("stack: start %s: %w", name, err)
	}
	p.readers.Add(2)
	go p.readLines(stdout, onStdout, false)
	go p.readLines(stderr, onStderr, true)
	go func() {
		p.readers.Wait() // Wait closes the pipes: read them to the end first
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *Process) readLines(r io.Reader, fn func([]byte), keep bool) {
	defer p.readers.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if fn != nil {
			fn(line)
		}
		if keep {
			p.mu.Lock()
			if len(p.crash) > 0 && len(p.crash) < crashHeadLines {
				p.crash = append(p.crash, string(line))
			} else if len(p.crash) == 0 && (bytes.HasPrefix(line, []byte("panic: ")) || bytes.HasPrefix(line, []byte("fatal error: "))) {
				p.crash = append(p.crash, string(line))
			}
			p.tail = append(p.tail, string(line))
			if len(p.tail) > 40 {
				p.tail = p.tail[len(p.tail)-40:]
			}
			p.mu.Unlock()
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// Done is closed when the process has exited (and its output was read).
func (p *Process) Done() <-chan struct{} { return p.exited }

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("stack: signal %s to %s: %w", sig, p.Name, err)
	}
	return nil
}

// Pause stops the process (SIGSTOP): it keeps its sockets and its state
// and runs on, from where it was, at Resume — a zombie in the making.
func (p *Process) Pause() error { return p.Signal(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (p *Process) Resume() error { return p.Signal(syscall.SIGCONT) }

// Kill sends SIGKILL (kill -9) and waits until the process is gone.
func (p *Process) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies too, but be sure it is reaped
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Terminate sends SIGTERM and waits up to timeout for a clean exit, then
// kills the process. It returns the exit error of a clean exit.
func (p *Process) Terminate(timeout time.Duration) error {
	if p.Exited() {
		return p.waitErr
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.Wait(timeout); err != nil && !p.Exited() {
		p.Kill()
		return err
	}
	return p.waitErr
}

// Wait waits up to timeout for the process to exit and returns its exit
// error (nil for status 0).
func (p *Process) Wait(timeout time.Duration) error {
	select { // an exited process answers at once, also to Wait(0)
	case <-p.exited:
		return p.waitErr
	default:
	}
	select {
	case <-p.exited:
		return p.waitErr
	case <-time.After(timeout):
		return fmt.Errorf("stack: %s still running after %v", p.Name, timeout)
	}
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Tail returns the last stderr lines, for failure messages, after the
// head of a Go crash report when the process crashed.
func (p *Process) Tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.crash) == 0 {
		return strings.Join(p.tail, "\n")
	}
	return strings.Join(p.crash, "\n") + "\n…\n" + strings.Join(p.tail, "\n")
}

// CleanEnv is this process's environment without CAPGATE_*, HARNESS_*
// and BENCH_* variables (the config loader refuses unknown CAPGATE_*
// ones, and a test's own environment must not point a part elsewhere)
// plus extra.
func CleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CAPGATE_") && !strings.HasPrefix(kv, "HARNESS_") && !strings.HasPrefix(kv, "BENCH_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}
