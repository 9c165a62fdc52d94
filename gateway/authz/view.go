package authz

import (
	"cmp"
	"crypto/ed25519"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// Config configures a View.
type Config struct {
	// Leeway is the clock leeway of token expiry (≤ ocap.MaxLeeway). A
	// denied id or revoked member is kept until its time plus Leeway, so
	// nothing it covers can still pass the expiry check once it is gone.
	Leeway time.Duration
}

// FenceKey names the partition of one group a fence applies to.
type FenceKey struct {
	Group     string
	Topic     string
	Partition int32
}

type memberKey struct {
	group, member string
}

// View is a gateway's revocation view. The zero value is not usable; call
// NewView. Safe for concurrent use.
type View struct {
	leeway int64 // seconds

	mu      sync.RWMutex
	seq     uint64
	fences  map[FenceKey]uint64
	denied  map[string]int64    // jti → exp (unix s)
	members map[memberKey]int64 // → until (unix s)
	qos     map[string]api.QoSOverride
	keys    map[string]ed25519.PublicKey

	qosCount atomic.Int32 // len(qos), read without the lock on the hot path
}

// NewView makes an empty view: no fences, nothing denied, no keys.
func NewView(cfg Config) *View {
	v := &View{leeway: int64(cfg.Leeway / time.Second)}
	v.clearLocked()
	return v
}

func (v *View) clearLocked() {
	v.seq = 0
	v.fences = map[FenceKey]uint64{}
	v.denied = map[string]int64{}
	v.members = map[memberKey]int64{}
	v.qos = map[string]api.QoSOverride{}
	v.keys = map[string]ed25519.PublicKey{}
	v.qosCount.Store(0)
}

// Changes reports what one Apply changed, for the shell to act on before
// it acknowledges the update.
type Changes struct {
	// Raised lists the fences that moved up (sorted), with their new epoch:
	// fetches admitted under a lower epoch must be cancelled.
	Raised []api.Fence
	// Revoked is true when a capability id was denied or a member revoked
	// that was not before: every in-flight fetch must be checked again.
	Revoked bool
	// Reset is true for a snapshot: every in-flight fetch must be checked
	// again.
	Reset bool
	// KeysChanged is true when the verification keys were replaced.
	KeysChanged bool
}

// Apply applies one sync update at now and prunes what expired. A Reset
// update replaces the whole view (keys are kept when the snapshot carries
// none, since a view without keys would refuse every token); otherwise
// fences only rise, denied ids and revoked members are sets, QoS overrides
// replace those with the same ID, and non-empty Keys replace the keys.
// Applying an update twice is the same as applying it once.
//
// A malformed key makes Apply return an error and change nothing.
func (v *View) Apply(u api.SyncResponse, now time.Time) (Changes, error) {
	var keys map[string]ed25519.PublicKey
	if len(u.Keys) > 0 {
		k, err := ocap.ImportJWKS(api.JWKS{Keys: u.Keys})
		if err != nil {
			return Changes{}, fmt.Errorf("authz: apply seq %d: %w", u.Seq, err)
		}
		keys = k
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	var ch Changes
	if u.Reset {
		ch = v.resetLocked(u, keys)
	} else {
		ch = v.mergeLocked(u)
		v.seq = max(v.seq, u.Seq)
	}
	if keys != nil && !sameKeys(v.keys, keys) {
		v.keys, ch.KeysChanged = keys, true
	}
	v.pruneLocked(now)
	ch.Raised = lastPerKey(ch.Raised)
	return ch, nil
}

// lastPerKey sorts raised fences by key and keeps the highest epoch of
// each key (one update may raise the same fence twice); nil when empty.
func lastPerKey(fs []api.Fence) []api.Fence {
	if len(fs) == 0 {
		return nil
	}
	slices.SortStableFunc(fs, func(a, b api.Fence) int { return cmp.Or(compareFences(a, b), cmp.Compare(a.Epoch, b.Epoch)) })
	out := fs[:0]
	for _, f := range fs {
		if n := len(out); n > 0 && compareFences(out[n-1], f) == 0 {
			out[n-1] = f
			continue
		}
		out = append(out, f)
	}
	return out
}

// resetLocked replaces everything but the keys with the snapshot u.
func (v *View) resetLocked(u api.SyncResponse, keys map[string]ed25519.PublicKey) Changes {
	old, oldKeys := v.fences, v.keys
	v.clearLocked()
	v.keys = oldKeys
	ch := v.mergeLocked(u)
	v.seq = u.Seq
	ch.Raised = ch.Raised[:0]
	for k, e := range v.fences {
		if e > old[k] {
			ch.Raised = append(ch.Raised, api.Fence{Group: k.Group, Topic: k.Topic, Partition: k.Partition, Epoch: e})
		}
	}
	ch.Reset, ch.Revoked = true, true
	return ch
}

// mergeLocked adds the entries of u to the view.
func (v *View) mergeLocked(u api.SyncResponse) Changes {
	var ch Changes
	for _, f := range u.Fences {
		k := FenceKey{f.Group, f.Topic, f.Partition}
		if f.Epoch > v.fences[k] {
			v.fences[k] = f.Epoch
			ch.Raised = append(ch.Raised, f)
		}
	}
	for _, d := range u.Denied {
		exp, ok := v.denied[d.JTI]
		ch.Revoked = ch.Revoked || !ok
		v.denied[d.JTI] = max(exp, d.Exp)
	}
	for _, m := range u.RevokedMembers {
		k := memberKey{m.Group, m.MemberID}
		until, ok := v.members[k]
		ch.Revoked = ch.Revoked || !ok
		v.members[k] = max(until, m.Until)
	}
	for _, q := range u.QoS {
		v.qos[q.ID] = q
	}
	v.qosCount.Store(int32(len(v.qos)))
	return ch
}

func sameKeys(a, b map[string]ed25519.PublicKey) bool {
	return maps.EqualFunc(a, b, func(x, y ed25519.PublicKey) bool { return x.Equal(y) })
}

func compareFences(a, b api.Fence) int {
	return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// Raise moves the fence of (group, topic, partition) up to epoch, for a
// valid capability whose epoch is above it. It reports whether the fence
// moved. Raise never lowers a fence.
func (v *View) Raise(group, topic string, partition int32, epoch uint64) bool {
	k := FenceKey{group, topic, partition}
	v.mu.RLock()
	cur := v.fences[k]
	v.mu.RUnlock()
	if epoch <= cur {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if epoch <= v.fences[k] {
		return false
	}
	v.fences[k] = epoch
	return true
}

// Fence returns the fence of (group, topic, partition); 0 means none.
func (v *View) Fence(group, topic string, partition int32) uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.fences[FenceKey{group, topic, partition}]
}

// Seq is the sequence number of the last update applied.
func (v *View) Seq() uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.seq
}

// Keys returns a copy of the verification keys, kid → public key, for
// ocap.Verifier.SetKeys.
func (v *View) Keys() map[string]ed25519.PublicKey {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return maps.Clone(v.keys)
}

// Prune drops denied ids and revoked members whose time (plus leeway) has
// passed at now, and QoS overrides past their Until. Apply prunes too;
// the shell calls Prune now and then when no updates come.
func (v *View) Prune(now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.pruneLocked(now)
}

func (v *View) pruneLocked(now time.Time) {
	n := now.Unix()
	maps.DeleteFunc(v.denied, func(_ string, exp int64) bool { return n >= exp+v.leeway })
	maps.DeleteFunc(v.members, func(_ memberKey, until int64) bool { return n >= until+v.leeway })
	maps.DeleteFunc(v.qos, func(_ string, q api.QoSOverride) bool { return n >= q.Until })
	v.qosCount.Store(int32(len(v.qos)))
}
