package harness

import (
	"context"
	"testing"

	"github.com/capgate/capgate/internal/stack"
)

// Coordinator is the cluster's coordinator (stack.Coordinator: in this
// process or a `capgate coordinator` process), its faults written to the
// log. Its address and data directory stay the same across Kill and
// Restart. Safe for concurrent use.
type Coordinator struct {
	*stack.Coordinator
	c *Cluster
}

// Kill stops the coordinator at once: SIGKILL for a process, Close for
// one in this process (graceful: held polls answered 503).
func (co *Coordinator) Kill(t testing.TB) {
	t.Helper()
	co.c.Log.AddFault("kill", "coordinator")
	co.Coordinator.Kill()
}

// Restart starts the coordinator again on the same address and data
// directory and waits until it is healthy.
func (co *Coordinator) Restart(t testing.TB) {
	t.Helper()
	co.c.Log.AddFault("restart", "coordinator")
	if err := co.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
}
