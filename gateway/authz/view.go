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
	"github.com/capgate/capgate/revocation"
)

// Config configures a View.
type Config struct {
	// Leeway is the clock leeway of token expiry (≤ ocap.MaxLeeway) until
	// a reset brings the coordinator's own (api.CoordinatorSettings), which
	// Decide uses from then on. Until the coordinator's rule arrives in a
	// reset, denied ids and revoked members hold for their time plus
	// Leeway; after, for their time plus the longer of both leeways plus
	// the coordinator's max_clock_skew (package revocation).
	Leeway time.Duration
}

// FenceKey names the partition of one group a fence applies to.
type FenceKey = revocation.FenceKey

// View is a gateway's revocation view. The zero value is not usable; call
// NewView. Safe for concurrent use.
type View struct {
	leeway atomic.Int64 // seconds: the expiry leeway of Decide
	own    revocation.Rule

	mu   sync.RWMutex
	seq  uint64
	set  *revocation.Set // fences, denied ids, revoked members
	qos  map[string]api.QoSOverride
	keys map[string]ed25519.PublicKey

	qosCount atomic.Int32 // len(qos), read without the lock on the hot path
}

// NewView makes an empty view: no fences, nothing denied, no keys.
func NewView(cfg Config) *View {
	own := revocation.Rule{Leeway: cfg.Leeway}
	v := &View{own: own, set: revocation.New(own)}
	v.leeway.Store(int64(cfg.Leeway / time.Second))
	v.keys = map[string]ed25519.PublicKey{}
	v.clearLocked(0)
	return v
}

// clearLocked empties everything but the keys, with room for fences
// fences, and returns the fences held before (revocation.Set.ClearFor).
func (v *View) clearLocked(fences int) map[FenceKey]uint64 {
	v.seq = 0
	old := v.set.ClearFor(fences)
	v.qos = map[string]api.QoSOverride{}
	v.qosCount.Store(0)
	return old
}

// Rule is the expiry rule the view applies to denied ids and revoked
// members.
func (v *View) Rule() revocation.Rule {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.set.Rule()
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
// Fences already in strict key order — the coordinator sends a reset's
// and a member's in that order — are returned as they are, unsorted.
func lastPerKey(fs []api.Fence) []api.Fence {
	if len(fs) == 0 {
		return nil
	}
	if inKeyOrder(fs) {
		return fs
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

// resetLocked replaces everything but the keys with the snapshot u, and
// learns the coordinator's expiry rule from it. Its raised fences are
// those above the view's before, found by one lookup each in the old
// fence map: sorting the old and the new fence lists to compare them
// cost a gateway ~40 ms of its write lock on a reset of 10,000 fences
// (BenchmarkApplyBulk), every fetch's check waiting behind it.
func (v *View) resetLocked(u api.SyncResponse, keys map[string]ed25519.PublicKey) Changes {
	old := v.clearLocked(len(u.Fences))
	if u.Settings != nil {
		v.leeway.Store(u.Settings.LeewayMs / 1000)
		v.set.SetRule(v.own.Cover(revocation.FromSettings(*u.Settings)))
	}
	ch := Changes{Raised: make([]api.Fence, 0, len(u.Fences))}
	for _, f := range u.Fences {
		k := FenceKey{Group: f.Group, Topic: f.Topic, Partition: f.Partition}
		if v.set.Raise(k, f.Epoch) && f.Epoch > old[k] {
			ch.Raised = append(ch.Raised, f)
		}
	}
	v.mergeOthersLocked(u, &ch)
	v.seq = u.Seq
	ch.Reset, ch.Revoked = true, true
	return ch
}

// mergeLocked adds the entries of u to the view.
func (v *View) mergeLocked(u api.SyncResponse) Changes {
	v.set.Grow(len(u.Fences)) // a bulk of new fences: room at once (revocation.Set.Grow)
	ch := Changes{Raised: make([]api.Fence, 0, len(u.Fences))}
	for _, f := range u.Fences {
		if v.set.Raise(FenceKey{Group: f.Group, Topic: f.Topic, Partition: f.Partition}, f.Epoch) {
			ch.Raised = append(ch.Raised, f)
		}
	}
	v.mergeOthersLocked(u, &ch)
	return ch
}

// mergeOthersLocked adds u's entries but its fences to the view.
func (v *View) mergeOthersLocked(u api.SyncResponse, ch *Changes) {
	for _, d := range u.Denied {
		ch.Revoked = v.set.Deny(d.JTI, d.Exp) || ch.Revoked
	}
	for _, m := range u.RevokedMembers {
		ch.Revoked = v.set.RevokeMember(revocation.MemberKey{Group: m.Group, Member: m.MemberID}, m.Until) || ch.Revoked
	}
	for _, q := range u.QoS {
		v.qos[q.ID] = q
	}
	v.qosCount.Store(int32(len(v.qos)))
}

// inKeyOrder reports whether every fence's key is above the one before.
func inKeyOrder(fs []api.Fence) bool {
	for i := 1; i < len(fs); i++ {
		if compareFences(fs[i-1], fs[i]) >= 0 {
			return false
		}
	}
	return true
}

func sameKeys(a, b map[string]ed25519.PublicKey) bool {
	return maps.EqualFunc(a, b, func(x, y ed25519.PublicKey) bool { return x.Equal(y) })
}

func compareFences(a, b api.Fence) int { return revocation.CompareFences(a, b) }

// Raise moves the fence of (group, topic, partition) up to epoch, for a
// valid capability whose epoch is above it. It reports whether the fence
// moved. Raise never lowers a fence.
func (v *View) Raise(group, topic string, partition int32, epoch uint64) bool {
	k := FenceKey{Group: group, Topic: topic, Partition: partition}
	v.mu.RLock()
	cur := v.set.Fence(k)
	v.mu.RUnlock()
	if epoch <= cur {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.set.Raise(k, epoch)
}

// Fence returns the fence of (group, topic, partition); 0 means none.
func (v *View) Fence(group, topic string, partition int32) uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.set.Fence(FenceKey{Group: group, Topic: topic, Partition: partition})
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

// Prune drops denied ids and revoked members that lapsed at now under
// the view's rule, and QoS overrides past their Until. Apply prunes too;
// the shell calls Prune now and then when no updates come. Pruning only
// frees memory: Decide applies the rule itself.
func (v *View) Prune(now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.pruneLocked(now)
}

func (v *View) pruneLocked(now time.Time) {
	v.set.Prune(now)
	n := now.Unix()
	maps.DeleteFunc(v.qos, func(_ string, q api.QoSOverride) bool { return n >= q.Until })
	v.qosCount.Store(int32(len(v.qos)))
}
