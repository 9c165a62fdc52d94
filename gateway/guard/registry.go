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
	list   *keyList[T] // its key's fetches, while registered
	seq    uint64      // admission order
}

// keyList is the fetches in flight of one (group, topic, partition).
type keyList[T any] struct{ entries []*Entry[T] }

// Registry tracks the fetches in flight by (group, topic, partition), so
// a raised fence finds the fetches admitted under older epochs and a
// deny-list or member revocation can check them all. Not safe for
// concurrent use.
//
// A key's list stays in the map when its last fetch finishes, and each
// entry points at its list: one fetch at a time costs one map lookup
// (Put), where adding and deleting the key cost four hashes of the key
// per fetch. The empty lists are dropped (sweep) when
// the map reaches sweepAt keys: at most ~2× the keys with fetches in
// flight, and at least minSweep, are ever kept.
type Registry[T any] struct {
	byKey   map[authz.FenceKey]*keyList[T]
	n       int
	seq     uint64
	bugs    Bugs
	sweepAt int
}

// minSweep is the least number of keys a registry keeps (empty lists
// included) before it drops the empty ones.
const minSweep = 1024

// NewRegistry returns an empty registry with bugs planted (tests only).
func NewRegistry[T any](bugs Bugs) *Registry[T] {
	return &Registry[T]{byKey: map[authz.FenceKey]*keyList[T]{}, bugs: bugs, sweepAt: minSweep}
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
	key := authz.FenceKey{Group: c.Group, Topic: c.Topic, Partition: c.PartitionNumber()}
	list := r.byKey[key]
	if list == nil {
		if len(r.byKey) >= r.sweepAt {
			r.sweep()
		}
		list = new(keyList[T])
		r.byKey[key] = list
	}
	*e = Entry[T]{Claims: c, Req: req, Value: v, seq: r.seq, list: list}
	list.entries = append(list.entries, e)
	r.n++
}

// sweep drops the keys with no fetch in flight and sets the size of the
// next sweep to twice what is left, at least minSweep.
func (r *Registry[T]) sweep() {
	for k, list := range r.byKey {
		if len(list.entries) == 0 {
			delete(r.byKey, k)
		}
	}
	r.sweepAt = max(minSweep, 2*len(r.byKey))
}

// Remove unregisters e (once its answer is decided and written).
func (r *Registry[T]) Remove(e *Entry[T]) {
	list := e.list
	if list == nil {
		return
	}
	i := slices.Index(list.entries, e)
	if i < 0 {
		return
	}
	list.entries = slices.Delete(list.entries, i, i+1) // clears the entry left behind
	e.list = nil
	r.n--
}

// Keys is the number of keys the registry holds, empty lists included
// (tests: what it keeps stays bounded).
func (r *Registry[T]) Keys() int { return len(r.byKey) }

// Len is the number of fetches in flight.
func (r *Registry[T]) Len() int { return r.n }

// All returns every fetch in flight, in admission order (shutdown cancels
// them all).
func (r *Registry[T]) All() []*Entry[T] {
	out := make([]*Entry[T], 0, r.n)
	for _, list := range r.byKey {
		out = append(out, list.entries...)
	}
	slices.SortFunc(out, func(a, b *Entry[T]) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// Below returns the fetches of key admitted under an epoch below epoch
// (a newer capability raised the fence: the coordinator mints e+1 only
// after fencing e), in admission order.
func (r *Registry[T]) Below(key authz.FenceKey, epoch uint64) []*Entry[T] {
	var out []*Entry[T]
	list := r.byKey[key]
	if list == nil {
		return nil
	}
	for _, e := range list.entries {
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
	refused := func(list *keyList[T]) {
		if list == nil {
			return
		}
		for _, e := range list.entries {
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
		out = append(out, list.entries...)
	}
	slices.SortFunc(out, func(a, b *Entry[T]) int { return cmp.Compare(a.seq, b.seq) })
	return out
}
