package cli_test

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/stack"
)

// consumeProcess is a `capgate consume` running in the background; it
// is killed at cleanup unless it exited.
type consumeProcess struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{} // closed once it exited; err is then its outcome
	err            error
}

func startConsume(t *testing.T, args ...string) *consumeProcess {
	t.Helper()
	p := &consumeProcess{cmd: exec.Command(capgate, args...), stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Env = stack.CleanEnv()
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// printed counts the lines printed so far.
func (p *consumeProcess) printed() int { return strings.Count(p.stdout.String(), "\n") }

// running reports whether it still runs, and why not.
func (p *consumeProcess) running() (bool, string) {
	select {
	case <-p.done:
		return false, fmt.Sprintf("consume exited: %v\nstderr:\n%s", p.err, p.stderr.String())
	default:
		return true, ""
	}
}

// interrupt sends SIGINT and fails unless it exits cleanly within 30 s.
func (p *consumeProcess) interrupt(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("consume exited with %v\nstderr:\n%s", p.err, p.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("consume did not exit on SIGINT\nstderr:\n%s", p.stderr.String())
	}
}
