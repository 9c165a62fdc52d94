package gateway

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/gateway/guard"
	"github.com/capgate/capgate/ocap"
)

// errFenced is the cancel cause of a fetch a revocation superseded.
var errFenced = errors.New("gateway: capability revoked while the fetch was in flight")

// fetchEntry is one fetch between admission and its last byte encoded:
// its place in the registry, its context's cancel and a done signal.
type fetchEntry struct {
	entry  *guard.Entry[*fetchEntry]
	cancel context.CancelCauseFunc
	done   chan struct{} // closed by finish
}

// inflight is the registry of fetches in flight (guard.Registry decides
// which a revocation refuses) behind a mutex, with what only a process
// has: contexts to cancel and the wait for each cancelled fetch to finish.
type inflight struct {
	mu  sync.Mutex
	reg *guard.Registry[*fetchEntry]

	cancelled atomic.Int64 // fetches cancelled by revocations, ever
}

func newInflight(bugs guard.Bugs) *inflight {
	return &inflight{reg: guard.NewRegistry[*fetchEntry](bugs)}
}

// start registers a fetch and returns its entry and context, a child of
// base that the revocation paths cancel.
func (f *inflight) start(base context.Context, c *ocap.Claims, req authz.Request) (*fetchEntry, context.Context) {
	ctx, cancel := context.WithCancelCause(base)
	e := &fetchEntry{cancel: cancel, done: make(chan struct{})}
	f.mu.Lock()
	e.entry = f.reg.Add(c, req, e)
	f.mu.Unlock()
	return e, ctx
}

// finish unregisters e once its response is decided and encoded.
func (f *inflight) finish(e *fetchEntry) {
	f.mu.Lock()
	f.reg.Remove(e.entry)
	f.mu.Unlock()
	e.cancel(nil)
	close(e.done)
}

// count is the number of fetches in flight.
func (f *inflight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reg.Len()
}

// cancelBelow cancels the fetches of key admitted under an epoch below
// epoch and returns how many; it does not wait for them.
func (f *inflight) cancelBelow(key authz.FenceKey, epoch uint64, cause error) int {
	f.mu.Lock()
	victims := f.reg.Below(key, epoch)
	f.mu.Unlock()
	for _, e := range victims {
		e.Value.cancel(cause)
	}
	f.cancelled.Add(int64(len(victims)))
	return len(victims)
}

// revoke cancels every fetch the view no longer allows after changes
// (guard.Registry.Refused) and waits until each has finished (answered
// 409, or completed a response it had already decided before the
// change). Only then may the sync client acknowledge the update. It
// returns how many fetches it cancelled.
func (f *inflight) revoke(ctx context.Context, ch authz.Changes, view *authz.View, now time.Time) int {
	f.mu.Lock()
	victims := f.reg.Refused(ch, view, now)
	f.mu.Unlock()
	for _, e := range victims {
		e.Value.cancel(errFenced)
	}
	f.cancelled.Add(int64(len(victims)))
	for _, e := range victims {
		select {
		case <-e.Value.done:
		case <-ctx.Done():
			return len(victims)
		}
	}
	return len(victims)
}
