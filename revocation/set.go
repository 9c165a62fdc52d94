package revocation

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// MemberKey names one member of one group.
type MemberKey struct {
	Group  string
	Member string
}

// FenceKey names the partition of one group a fence applies to.
type FenceKey struct {
	Group     string
	Topic     string
	Partition int32
}

// Verdict is what the view says about a token.
type Verdict uint8

// The verdicts, in the order Check tests them.
const (
	Allow         Verdict = iota
	Fenced                // its epoch is below the partition's fence
	Denied                // its jti or an ancestor in chn is denied
	RevokedMember         // its (grp, sub) is a revoked member
)

func (v Verdict) String() string {
	return [...]string{"allow", "fenced", "denied", "revoked_member"}[v]
}

// Set holds the entries. The zero value is not usable; call New.
type Set struct {
	rule    Rule
	denied  map[string]int64    // id → exp (unix s)
	members map[MemberKey]int64 // → until (unix s)
	fences  map[FenceKey]uint64
}

// New returns an empty set under rule.
func New(rule Rule) *Set {
	s := &Set{rule: rule}
	s.Clear()
	return s
}

// Clear empties the set; the rule stays.
func (s *Set) Clear() { s.ClearFor(0) }

// ClearFor empties the set as Clear does, with room for fences fences
// (a reset's: the map is not grown step by step), and returns the fences
// it held, for the caller to compare the new ones with — read only.
func (s *Set) ClearFor(fences int) (old map[FenceKey]uint64) {
	old = s.fences
	s.denied = map[string]int64{}
	s.members = map[MemberKey]int64{}
	s.fences = make(map[FenceKey]uint64, fences)
	return old
}

// growMin is the fewest fences Grow makes room for at once.
const growMin = 1024

// Grow makes room for n more fences when n is at least as many as the
// set holds (and at least growMin): the map is rebuilt at its final size
// once, copying at most n fences, instead of growing step by step while
// they are raised. The revoke of a member holding 10,000 partitions not
// fenced before is 10,000 new keys: growing the map under them was most
// of a gateway's apply (authz BenchmarkApplyBulk/delta-new against
// /delta, the same fences raised over keys held; BENCHMARKS §3), under
// the view's write lock that every fetch's check waits on. Smaller
// additions grow the map as usual: copying a large map for a few fences
// would cost more than it saves.
func (s *Set) Grow(n int) {
	if n < growMin || n < len(s.fences) {
		return
	}
	grown := make(map[FenceKey]uint64, len(s.fences)+n)
	maps.Copy(grown, s.fences)
	s.fences = grown
}

// Rule is the set's expiry rule.
func (s *Set) Rule() Rule { return s.rule }

// SetRule replaces the expiry rule (a gateway learns the coordinator's).
func (s *Set) SetRule(r Rule) { s.rule = r }

// Deny denies id (and everything chained from it) until exp. It keeps the
// later exp and reports whether id was not denied before.
func (s *Set) Deny(id string, exp int64) (added bool) {
	old, ok := s.denied[id]
	s.denied[id] = max(old, exp)
	return !ok
}

// RevokeMember revokes every token whose grp and sub are k until until.
// It keeps the later time and reports whether k was not revoked before.
func (s *Set) RevokeMember(k MemberKey, until int64) (added bool) {
	old, ok := s.members[k]
	s.members[k] = max(old, until)
	return !ok
}

// Raise moves k's fence up to epoch; it never lowers one. It reports
// whether the fence moved.
func (s *Set) Raise(k FenceKey, epoch uint64) bool {
	if epoch <= s.fences[k] {
		return false
	}
	s.fences[k] = epoch
	return true
}

// Fence is k's fence; 0 means none.
func (s *Set) Fence(k FenceKey) uint64 { return s.fences[k] }

// DeniedAt reports whether id is denied at now.
func (s *Set) DeniedAt(id string, now time.Time) bool {
	exp, ok := s.denied[id]
	return ok && s.rule.Holds(exp, now)
}

// RevokedAt reports whether member k is revoked at now.
func (s *Set) RevokedAt(k MemberKey, now time.Time) bool {
	until, ok := s.members[k]
	return ok && s.rule.Holds(until, now)
}

// DenyExp is the exp id is denied until (ok false when it is not listed,
// lapsed or not).
func (s *Set) DenyExp(id string) (int64, bool) {
	exp, ok := s.denied[id]
	return exp, ok
}

// RevokedUntil is the time member k is revoked until (ok false when it
// is not listed).
func (s *Set) RevokedUntil(k MemberKey) (int64, bool) {
	until, ok := s.members[k]
	return until, ok
}

// Check says whether the view refuses the verified token c at now: its
// epoch is below its partition's fence (capabilities with an epoch), its
// jti or any ancestor in chn is denied, or its (grp, sub) is a revoked
// member. It does not check c's own expiry. It never allocates.
func (s *Set) Check(c *ocap.Claims, now time.Time) Verdict {
	if c.Epoch != 0 && len(s.fences) > 0 && c.Epoch < s.fences[FenceKey{c.Group, c.Topic, c.PartitionNumber()}] {
		return Fenced
	}
	if len(s.denied) > 0 {
		if s.DeniedAt(c.ID, now) {
			return Denied
		}
		for _, ancestor := range c.Chain {
			if s.DeniedAt(ancestor, now) {
				return Denied
			}
		}
	}
	if c.Group != "" && len(s.members) > 0 && s.RevokedAt(MemberKey{c.Group, c.Subject}, now) {
		return RevokedMember
	}
	return Allow
}

// Prune drops the denied ids and revoked members kept long enough at now
// (Rule.Kept: lapsed, and Retain past that) and returns them, sorted.
// Fences are never pruned.
func (s *Set) Prune(now time.Time) ([]api.Denied, []api.RevokedMember) {
	var denied []api.Denied
	var members []api.RevokedMember
	for id, exp := range s.denied {
		if !now.Before(s.rule.Kept(exp)) {
			denied = append(denied, api.Denied{JTI: id, Exp: exp})
			delete(s.denied, id)
		}
	}
	for k, until := range s.members {
		if !now.Before(s.rule.Kept(until)) {
			members = append(members, api.RevokedMember{Group: k.Group, MemberID: k.Member, Until: until})
			delete(s.members, k)
		}
	}
	sortDenied(denied)
	sortMembers(members)
	return denied, members
}

// Len is the number of denied ids and revoked members listed.
func (s *Set) Len() (denied, members int) { return len(s.denied), len(s.members) }

// Denied lists the denied ids, sorted by id (nil when none).
func (s *Set) Denied() []api.Denied {
	var out []api.Denied
	for id, exp := range s.denied {
		out = append(out, api.Denied{JTI: id, Exp: exp})
	}
	sortDenied(out)
	return out
}

// Members lists the revoked members, sorted by group and member (nil
// when none).
func (s *Set) Members() []api.RevokedMember {
	var out []api.RevokedMember
	for k, until := range s.members {
		out = append(out, api.RevokedMember{Group: k.Group, MemberID: k.Member, Until: until})
	}
	sortMembers(out)
	return out
}

// Fences lists the fences, sorted by group, topic and partition (nil
// when none).
func (s *Set) Fences() []api.Fence {
	var out []api.Fence
	for k, e := range s.fences {
		out = append(out, api.Fence{Group: k.Group, Topic: k.Topic, Partition: k.Partition, Epoch: e})
	}
	slices.SortFunc(out, CompareFences)
	return out
}

// CompareFences orders fences by group, topic and partition.
func CompareFences(a, b api.Fence) int {
	return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

func sortDenied(d []api.Denied) {
	slices.SortFunc(d, func(a, b api.Denied) int { return strings.Compare(a.JTI, b.JTI) })
}

func sortMembers(m []api.RevokedMember) {
	slices.SortFunc(m, func(a, b api.RevokedMember) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.MemberID, b.MemberID))
	})
}
