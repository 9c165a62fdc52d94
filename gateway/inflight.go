package gateway

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/gateway/guard"
	"github.com/capgate/capgate/ocap"
)

// errFenced is the cancel cause of a fetch a revocation superseded.
var errFenced = errors.New("gateway: capability revoked while the fetch was in flight")

// errClientGone is the cancel cause of a long poll whose client closed its
// connection.
var errClientGone = errors.New("gateway: the client went away during the long poll")

// fetchEntry is one fetch between admission and its last byte encoded:
// its place in the registry, its holder, the context its broker call runs
// under (cancel ends it) and a done signal.
type fetchEntry struct {
	entry  *guard.Entry[*fetchEntry]
	holder string
	ctx    fetchCtx
	stop   func() bool   // unlinks ctx from a base context, if any
	done   chan struct{} // closed by finish
}

// cancel cancels the fetch's broker call with cause.
func (e *fetchEntry) cancel(cause error) { e.ctx.cancel(cause) }

// inflight is the registry of fetches in flight (guard.Registry decides
// which a revocation refuses) behind a mutex, with what only a process
// has: contexts to cancel and the wait for each cancelled fetch to finish.
// It also bounds them: max in all, maxPerHolder per holder (holderOf).
type inflight struct {
	max, maxPerHolder int

	mu       sync.Mutex
	reg      *guard.Registry[*fetchEntry]
	byHolder map[string]int
	closed   error // set by shutdown: every later fetch starts cancelled

	cancelled atomic.Int64 // fetches cancelled by revocations, ever
}

func newInflight(bugs guard.Bugs, max, maxPerHolder int) *inflight {
	return &inflight{reg: guard.NewRegistry[*fetchEntry](bugs), max: max, maxPerHolder: maxPerHolder, byHolder: map[string]int{}}
}

// holderOf is whom a capability's fetches count against: the root of its
// chain (an attenuated child and its own children share their root's
// allowance), else the capability itself.
func holderOf(c *ocap.Claims) string { return c.Root() }

// start registers a fetch and returns its entry and context, which the
// revocation paths, a client hang-up and shutdown cancel; or, with
// nothing registered, api.CodeOverloaded when max fetches are in flight
// and api.CodeTooManyFetches when the holder has maxPerHolder.
func (f *inflight) start(c *ocap.Claims, req authz.Request) (*fetchEntry, *fetchCtx, api.Code) {
	holder := holderOf(c)
	f.mu.Lock()
	switch {
	case f.reg.Len() >= f.max:
		f.mu.Unlock()
		return nil, nil, api.CodeOverloaded
	case f.byHolder[holder] >= f.maxPerHolder:
		f.mu.Unlock()
		return nil, nil, api.CodeTooManyFetches
	}
	e := f.registerLocked(c, req, holder)
	f.mu.Unlock()
	return e, &e.ctx, ""
}

// startUnder is start for a fetch whose context also ends with base (the
// Kafka listener's fetches that ask Kafka).
func (f *inflight) startUnder(base context.Context, c *ocap.Claims, req authz.Request) (*fetchEntry, context.Context, api.Code) {
	e, _, code := f.start(c, req)
	if code != "" {
		return nil, nil, code
	}
	e.stop = context.AfterFunc(base, func() { e.cancel(context.Cause(base)) })
	return e, &e.ctx, ""
}

// register is start without the caps: the Kafka listener's fetches
// answered from its read-ahead (no Kafka exchange), still counted towards
// them and revocable like any other.
// Its context also ends with base.
func (f *inflight) register(base context.Context, c *ocap.Claims, req authz.Request) (*fetchEntry, context.Context) {
	f.mu.Lock()
	e := f.registerLocked(c, req, holderOf(c))
	f.mu.Unlock()
	e.stop = context.AfterFunc(base, func() { e.cancel(context.Cause(base)) })
	return e, &e.ctx
}

func (f *inflight) registerLocked(c *ocap.Claims, req authz.Request, holder string) *fetchEntry {
	e := &fetchEntry{holder: holder, done: make(chan struct{})}
	e.entry = f.reg.Add(c, req, e)
	f.byHolder[holder]++
	if f.closed != nil {
		e.cancel(f.closed)
	}
	return e
}

// shutdown cancels every fetch in flight, and every one started later,
// with cause.
func (f *inflight) shutdown(cause error) {
	f.mu.Lock()
	f.closed = cause
	var all []*fetchEntry
	for _, e := range f.reg.All() {
		all = append(all, e.Value)
	}
	f.mu.Unlock()
	for _, e := range all {
		e.cancel(cause)
	}
}

// finish unregisters e once its response is decided and encoded.
func (f *inflight) finish(e *fetchEntry) {
	f.mu.Lock()
	f.reg.Remove(e.entry)
	if f.byHolder[e.holder]--; f.byHolder[e.holder] <= 0 {
		delete(f.byHolder, e.holder)
	}
	f.mu.Unlock()
	if e.stop != nil {
		e.stop()
	}
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
