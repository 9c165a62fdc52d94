package gateway

import (
	"context"
	"sync"
	"time"
)

// fetchCtx is the context a fetch's broker call runs under; revocations,
// a hang-up of its client and shutdown cancel it, with a cause (Cause).
//
// Why not context.WithCancelCause(base): that costs every fetch a
// cancelCtx, an entry in the children map of a parent all fetches share
// (under its lock), a Done channel, and an afterFuncCtx for the broker
// connection's interrupt — a third of the gateway's allocations per fetch
// in the deployed profile (BENCHMARKS.md §0). Nothing derives from a
// fetch's context and its one watcher registers through AfterFunc, which
// here records the function and runs it on the cancelling goroutine
// (functions registered must not block: the broker's only sets a
// deadline on its socket).
type fetchCtx struct {
	mu     sync.Mutex
	cause  error
	done   chan struct{} // made on demand; closed by cancel
	afters []afterEntry
	nextID uint64
}

type afterEntry struct {
	id uint64
	f  func()
}

var _ context.Context = (*fetchCtx)(nil)

func (c *fetchCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *fetchCtx) Value(any) any               { return nil }

// Done returns a channel closed once the fetch is cancelled.
func (c *fetchCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.cause != nil {
			close(c.done)
		}
	}
	return c.done
}

// Err is context.Canceled once cancelled.
func (c *fetchCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cause != nil {
		return context.Canceled
	}
	return nil
}

// Cause is why the fetch was cancelled (nil while it is not).
func (c *fetchCtx) Cause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause
}

// cancel cancels the fetch with cause (the first cause sticks) and runs
// the registered functions.
func (c *fetchCtx) cancel(cause error) {
	if cause == nil {
		cause = context.Canceled
	}
	c.mu.Lock()
	if c.cause != nil {
		c.mu.Unlock()
		return
	}
	c.cause = cause
	if c.done != nil {
		close(c.done)
	}
	afters := c.afters
	c.afters = nil
	c.mu.Unlock()
	for _, a := range afters {
		a.f()
	}
}

// AfterFunc registers f to run once the fetch is cancelled, on the
// goroutine that cancels it (at once, on a new goroutine, if it already
// is). stop unregisters f and reports whether it did so before f ran.
// The broker's fetch connections use it instead of context.AfterFunc.
func (c *fetchCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.cause != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	c.nextID++
	id := c.nextID
	c.afters = append(c.afters, afterEntry{id: id, f: f})
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, a := range c.afters {
			if a.id == id {
				c.afters = append(c.afters[:i], c.afters[i+1:]...)
				return true
			}
		}
		return false
	}
}
