package coordinator

import (
	"errors"
	"time"

	"github.com/capgate/capgate/coordinator/group"
)

// BlockLoop holds the coordinator's loop in a query until release is
// called: requests queue up behind it as they would behind a busy loop.
func BlockLoop(c *Coordinator) (release func(), err error) {
	entered, gate, failed := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		failed <- c.query(func(*group.Machine) {
			close(entered)
			<-gate
		})
	}()
	select {
	case <-entered:
		return func() { close(gate) }, nil
	case err := <-failed:
		return nil, errors.Join(errors.New("block loop"), err)
	}
}

// LengthenLoopShareWait makes a member request wait up to d for its
// tenant's place or token (5 s otherwise), so that a test holding the
// loop on a loaded machine sees no waiter give up.
func LengthenLoopShareWait(c *Coordinator, d time.Duration) { c.share.wait.Store(int64(d)) }

// LoopQueued is the number of requests in the loop's queue.
func LoopQueued(c *Coordinator) int { return len(c.loop.requests) }

// LoopShareWaiting is the number of member requests waiting for a place
// of their tenant's loop share.
func LoopShareWaiting(c *Coordinator) int {
	c.share.mu.Lock()
	defer c.share.mu.Unlock()
	n := 0
	for _, t := range c.share.tenants {
		n += t.waiting
	}
	return n
}
