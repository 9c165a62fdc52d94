package guard

import (
	"cmp"
	"slices"
	"time"

	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/ocap"
)

// Entry is one fetch between its admission and its answer: the
// capability it was admitted under, what it asked for, and the shell's
// handle on it (Value).
type Entry[T any] struct {
	Claims *ocap.Claims
	Req    authz.Request
	Value  T
	key    authz.FenceKey
	seq    uint64 // admission order
}

// Registry tracks the fetches in flight by (group, topic, partition), so
// a raised fence finds the fetches admitted under older epochs and a
// deny-list or member revocation can check them all. Not safe for
// concurrent use.
type Registry[T any] struct {
	byKey map[authz.FenceKey][]*Entry[T]
	n     int
	seq   uint64
	bugs  Bugs
	// spare is the emptied list of the last key whose fetches all
	// finished, reused by the next key that has none: one fetch at a
	// time, a key's list would otherwise be made and dropped per fetch.
	spare []*Entry[T]
}

// NewRegistry returns an empty registry with bugs planted (tests only).
func NewRegistry[T any](bugs Bugs) *Registry[T] {
	return &Registry[T]{byKey: map[authz.FenceKey][]*Entry[T]{}, bugs: bugs}
}

// Add registers a fetch admitted under c for req.
func (r *Registry[T]) Add(c *ocap.Claims, req authz.Request, v T) *Entry[T] {
	e := new(Entry[T])
	r.Put(e, c, req, v)
	return e
}

// Put is Add into an Entry the caller allocated (the gateway embeds it
// in its own record of the fetch: one allocation per fetch, not two).
// e must be unregistered; it is overwritten.
func (r *Registry[T]) Put(e *Entry[T], c *ocap.Claims, req authz.Request, v T) {
	r.seq++
	*e = Entry[T]{Claims: c, Req: req, Value: v, seq: r.seq,
		key: authz.FenceKey{Group: c.Group, Topic: c.Topic, Partition: c.PartitionNumber()}}
	list, ok := r.byKey[e.key]
	if !ok && r.spare != nil {
		list, r.spare = r.spare, nil
	}
	r.byKey[e.key] = append(list, e)
	r.n++
}

// Remove unregisters e (once its answer is decided and written).
func (r *Registry[T]) Remove(e *Entry[T]) {
	list := r.byKey[e.key]
	i := slices.Index(list, e)
	if i < 0 {
		return
	}
	list = slices.Delete(list, i, i+1) // clears the entry left behind
	if len(list) == 0 {
		delete(r.byKey, e.key)
		r.spare = list
	} else {
		r.byKey[e.key] = list
	}
	r.n--
}

// Len is the number of fetches in flight.
func (r *Registry[T]) Len() int { return r.n }

// All returns every fetch in flight, in admission order (shutdown cancels
// them all).
func (r *Registry[T]) All() []*Entry[T] {
	out := make([]*Entry[T], 0, r.n)
	for _, list := range r.byKey {
		out = append(out, list...)
	}
	slices.SortFunc(out, func(a, b *Entry[T]) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// Below returns the fetches of key admitted under an epoch below epoch
// (a newer capability raised the fence: the coordinator mints e+1 only
// after fencing e), in admission order.
func (r *Registry[T]) Below(key authz.FenceKey, epoch uint64) []*Entry[T] {
	var out []*Entry[T]
	for _, e := range r.byKey[key] {
		if e.Claims.Epoch != 0 && e.Claims.Epoch < epoch {
			out = append(out, e)
		}
	}
	return out
}

// Refused returns the fetches the view refuses at now after an update
// that made changes, in admission order: every fetch on a reset or a new
// denial or member revocation, else those of the raised fences. The
// shell cancels them and waits for each before it acknowledges the
// update.
func (r *Registry[T]) Refused(ch authz.Changes, view *authz.View, now time.Time) []*Entry[T] {
	if r.bugs.KeepVictims {
		return nil
	}
	var out []*Entry[T]
	refused := func(list []*Entry[T]) {
		for _, e := range list {
			if authz.Refuses(e.Claims, e.Req, view, now) {
				out = append(out, e)
			}
		}
	}
	if ch.Reset || ch.Revoked {
		for _, list := range r.byKey {
			refused(list)
		}
	} else {
		for _, f := range ch.Raised {
			refused(r.byKey[authz.FenceKey{Group: f.Group, Topic: f.Topic, Partition: f.Partition}])
		}
	}
	slices.SortFunc(out, func(a, b *Entry[T]) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// Entries returns every fetch in flight, in admission order (for
// checkers and debugging; O(n log n)).
func (r *Registry[T]) Entries() []*Entry[T] {
	out := make([]*Entry[T], 0, r.n)
	for _, list := range r.byKey {
		out = append(out, list...)
	}
	slices.SortFunc(out, func(a, b *Entry[T]) int { return cmp.Compare(a.seq, b.seq) })
	return out
}
