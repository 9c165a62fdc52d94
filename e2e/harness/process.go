package harness

import (
	"bufio"
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
	"testing"
	"time"
)

// Binaries are the programs a test runs as processes.
type Binaries struct {
	// Capgate is the capgate binary (`go build ./cmd/capgate`).
	Capgate string
	// Consumer is the harness consumer (`go build ./e2e/harness/cmd/consumer`).
	Consumer string
}

// Build compiles the capgate binary and the harness consumer into dir
// with the go command, from the module containing the working directory.
func Build(dir string) (Binaries, error) {
	root, err := ModuleRoot()
	if err != nil {
		return Binaries{}, err
	}
	b := Binaries{Capgate: filepath.Join(dir, "capgate"), Consumer: filepath.Join(dir, "consumer")}
	for pkg, out := range map[string]string{"./cmd/capgate": b.Capgate, "./e2e/harness/cmd/consumer": b.Consumer} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = root
		if output, err := cmd.CombinedOutput(); err != nil {
			return Binaries{}, fmt.Errorf("harness: go build %s: %w\n%s", pkg, err, output)
		}
	}
	return b, nil
}

// ModuleRoot is the nearest directory at or above the working directory
// holding a go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("harness: module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("harness: module root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// SignalsSupported reports whether the harness can kill, stop and
// continue processes here, and why not.
func SignalsSupported() (bool, string) {
	switch runtime.GOOS {
	case "linux", "darwin", "freebsd":
		return true, ""
	}
	return false, "kill -9 and SIGSTOP need a Unix, running on " + runtime.GOOS
}

// Process is a program the test runs: its stdout and stderr lines go to
// callbacks, the last stderr lines are kept for failure messages. Safe for
// concurrent use.
type Process struct {
	Name string
	cmd  *exec.Cmd

	exited  chan struct{}
	waitErr error
	readers sync.WaitGroup

	mu   sync.Mutex
	tail []string // last stderr lines
}

// StartProcess starts bin with args and env; onStdout and onStderr (may
// be nil) receive each line. The caller stops it (a part restarted late
// in a test must not be killed before the parts that depend on it, as a
// cleanup of its own would).
func StartProcess(t testing.TB, name, bin string, args, env []string, onStdout, onStderr func([]byte)) *Process {
	t.Helper()
	p := &Process{Name: name, cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.cmd.Env = env
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p.readers.Add(2)
	go p.readLines(stdout, onStdout, false)
	go p.readLines(stderr, onStderr, true)
	go func() {
		p.readers.Wait() // Wait closes the pipes: read them to the end first
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	return p
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
			p.tail = append(p.tail, string(line))
			if len(p.tail) > 40 {
				p.tail = p.tail[len(p.tail)-40:]
			}
			p.mu.Unlock()
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("harness: signal %s to %s: %w", sig, p.Name, err)
	}
	return nil
}

// Kill sends SIGKILL (kill -9) and waits until the process is gone.
func (p *Process) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies too, but be sure it is reaped
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Wait waits up to timeout for the process to exit and returns its exit
// error (nil for status 0).
func (p *Process) Wait(timeout time.Duration) error {
	select {
	case <-p.exited:
		return p.waitErr
	case <-time.After(timeout):
		return fmt.Errorf("harness: %s still running after %v", p.Name, timeout)
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

// Tail returns the last stderr lines, for failure messages.
func (p *Process) Tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// cleanEnv is the test's environment without CAPGATE_* variables (the
// config loader refuses unknown ones) plus extra.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CAPGATE_") && !strings.HasPrefix(kv, "HARNESS_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}
