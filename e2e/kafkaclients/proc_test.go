package kafkaclients

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/stack"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// kgoConsumerBin builds cmd/kgoconsumer once per test run.
func kgoConsumerBin(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := stack.ModuleRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "kgoconsumer")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "kgoconsumer")
		cmd := exec.Command("go", "build", "-o", builtBin, "./e2e/kafkaclients/cmd/kgoconsumer")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = err
			t.Logf("%s", out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build kgoconsumer: %v", buildErr)
	}
	return builtBin
}

// event is one line of kgoconsumer's output.
type event struct {
	At         int64   `json:"at"`
	Ev         string  `json:"ev"`
	Partition  int32   `json:"p"`
	Offset     int64   `json:"o"`
	Partitions []int32 `json:"ps"`
	Offs       []int64 `json:"offs"`
	Err        string  `json:"err"`
}

func (e event) time() time.Time { return time.Unix(0, e.At) }

// consumerProc is a kgoconsumer process and the events it printed.
type consumerProc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	events []event
	done   chan struct{}
}

// startConsumerProc runs kgoconsumer against the stack's gateways.
func startConsumerProc(t testing.TB, s *Stack, name, group, token, protocol string) *consumerProc {
	t.Helper()
	cmd := exec.Command(kgoConsumerBin(t), "-brokers", strings.Join(s.KafkaAddrs(), ","), "-group", group,
		"-topic", s.Topic, "-client-id", name, "-protocol", protocol)
	cmd.Env = append(os.Environ(), "CAPGATE_TOKEN="+token)
	return runProc(t, cmd)
}

// runProc starts cmd and collects the JSON events it prints; the test's
// cleanup stops it (SIGTERM, then kill).
func runProc(t testing.TB, cmd *exec.Cmd) *consumerProc {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &consumerProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				p.mu.Lock()
				p.events = append(p.events, e)
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
		_ = cmd.Wait()
	})
	return p
}

func (p *consumerProc) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// Events returns a copy of the events so far.
func (p *consumerProc) Events() []event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]event(nil), p.events...)
}

// assigned is the process's assignment after its events so far.
func (p *consumerProc) assigned() map[int32]bool {
	out := map[int32]bool{}
	for _, e := range p.Events() {
		for _, part := range e.Partitions {
			switch e.Ev {
			case "assigned":
				out[part] = true
			case "revoked", "lost":
				delete(out, part)
			}
		}
	}
	return out
}
