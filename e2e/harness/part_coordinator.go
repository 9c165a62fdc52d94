package harness

import (
	"context"
	"fmt"
	"testing"

	"github.com/capgate/capgate/internal/stack"
)

// Coordinator is one coordinator of the cluster (stack.Coordinator: in
// this process or a `capgate coordinator` process; with replicas, one of
// them), its faults written to the log under its name. Its address and
// data directory stay the same across Kill and Restart. Safe for
// concurrent use.
type Coordinator struct {
	*stack.Coordinator
	c *Cluster
}

// Kill stops the coordinator at once: SIGKILL for a process, Close for
// one in this process (graceful: held polls answered 503).
func (co *Coordinator) Kill(t testing.TB) {
	t.Helper()
	co.c.Log.AddFault("kill", co.Name)
	co.Coordinator.Kill()
}

// Restart starts the coordinator again on the same address and data
// directory and waits until it is healthy.
func (co *Coordinator) Restart(t testing.TB) {
	t.Helper()
	co.c.Log.AddFault("restart", co.Name)
	if err := co.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Pause stops the coordinator's process (SIGSTOP) and Resume continues
// it (SIGCONT): a paused leader resumes a zombie.
func (co *Coordinator) Pause(t testing.TB) { co.signal(t, "stop", (*stack.Process).Pause) }

// Resume continues a paused coordinator process.
func (co *Coordinator) Resume(t testing.TB) { co.signal(t, "cont", (*stack.Process).Resume) }

func (co *Coordinator) signal(t testing.TB, kind string, fn func(*stack.Process) error) {
	t.Helper()
	p := co.Process()
	if p == nil {
		t.Fatal(fmt.Errorf("harness: %s: signals need a coordinator process", co.Name))
	}
	co.c.Log.AddFault(kind, co.Name)
	if err := fn(p); err != nil {
		t.Fatal(err)
	}
}
