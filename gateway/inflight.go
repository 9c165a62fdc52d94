package gateway

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/ocap"
)

// errFenced is the cancel cause of a fetch a revocation superseded.
var errFenced = errors.New("gateway: capability revoked while the fetch was in flight")

// fetchEntry is one fetch between admission and its last byte encoded.
type fetchEntry struct {
	key    authz.FenceKey
	claims *ocap.Claims
	req    authz.Request
	cancel context.CancelCauseFunc
	done   chan struct{} // closed by finish
}

// inflight tracks the fetches in flight by (group, topic, partition), so a
// raised fence finds the fetches admitted under older epochs, and a
// deny-list or member revocation can check them all.
type inflight struct {
	mu    sync.Mutex
	byKey map[authz.FenceKey][]*fetchEntry
	n     int

	cancelled atomic.Int64 // fetches cancelled by revocations, ever
}

func newInflight() *inflight {
	return &inflight{byKey: map[authz.FenceKey][]*fetchEntry{}}
}

// start registers a fetch and returns its entry and context, a child of
// base that the revocation paths cancel.
func (f *inflight) start(base context.Context, c *ocap.Claims, req authz.Request) (*fetchEntry, context.Context) {
	ctx, cancel := context.WithCancelCause(base)
	e := &fetchEntry{
		key:    authz.FenceKey{Group: c.Group, Topic: c.Topic, Partition: c.PartitionNumber()},
		claims: c, req: req, cancel: cancel, done: make(chan struct{}),
	}
	f.mu.Lock()
	f.byKey[e.key] = append(f.byKey[e.key], e)
	f.n++
	f.mu.Unlock()
	return e, ctx
}

// finish unregisters e once its response is decided and encoded.
func (f *inflight) finish(e *fetchEntry) {
	f.mu.Lock()
	list := f.byKey[e.key]
	for i, x := range list {
		if x == e {
			list[i] = list[len(list)-1]
			list[len(list)-1] = nil
			list = list[:len(list)-1]
			break
		}
	}
	if len(list) == 0 {
		delete(f.byKey, e.key)
	} else {
		f.byKey[e.key] = list
	}
	f.n--
	f.mu.Unlock()
	e.cancel(nil)
	close(e.done)
}

// count is the number of fetches in flight.
func (f *inflight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// cancelBelow cancels the fetches of key admitted under an epoch below
// epoch and returns how many; it does not wait for them.
func (f *inflight) cancelBelow(key authz.FenceKey, epoch uint64, cause error) int {
	victims := f.ofKey(key, func(e *fetchEntry) bool { return e.claims.Epoch != 0 && e.claims.Epoch < epoch })
	for _, e := range victims {
		e.cancel(cause)
	}
	f.cancelled.Add(int64(len(victims)))
	return len(victims)
}

// ofKey returns the fetches of key that keep selects.
func (f *inflight) ofKey(key authz.FenceKey, keep func(*fetchEntry) bool) []*fetchEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return appendKept(nil, f.byKey[key], keep)
}

// all returns every fetch that keep selects.
func (f *inflight) all(keep func(*fetchEntry) bool) []*fetchEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*fetchEntry
	for _, list := range f.byKey {
		out = appendKept(out, list, keep)
	}
	return out
}

func appendKept(out, list []*fetchEntry, keep func(*fetchEntry) bool) []*fetchEntry {
	for _, e := range list {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// revoke cancels every fetch the view no longer allows after changes and
// waits until each has finished (answered 409, or completed a response it
// had already decided before the change). Only then may the sync client
// acknowledge the update. It returns how many fetches it cancelled.
func (f *inflight) revoke(ctx context.Context, ch authz.Changes, view *authz.View, now time.Time) int {
	refused := func(e *fetchEntry) bool { return authz.Decide(e.claims, e.req, view, now) != authz.Allow }
	var victims []*fetchEntry
	if ch.Reset || ch.Revoked {
		victims = f.all(refused)
	} else {
		for _, fence := range ch.Raised {
			key := authz.FenceKey{Group: fence.Group, Topic: fence.Topic, Partition: fence.Partition}
			victims = append(victims, f.ofKey(key, refused)...)
		}
	}
	for _, e := range victims {
		e.cancel(errFenced)
	}
	f.cancelled.Add(int64(len(victims)))
	for _, e := range victims {
		select {
		case <-e.done:
		case <-ctx.Done():
			return len(victims)
		}
	}
	return len(victims)
}
