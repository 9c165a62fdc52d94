package bench

import (
	"slices"
	"time"
)

// The rebalance scenario's judgement, kept free of IO and clocks so it is
// tested on made-up timelines: what each partition saw around the join.

// delivery is one record handed to a member by its poll.
type delivery struct {
	At     time.Time
	Offset int64
	Member string
}

// ownership is one hook call for one partition: Member got it (Held) or
// gave it up (revoked or lost).
type ownership struct {
	At     time.Time
	Member string
	Held   bool
}

// timeline is everything one rebalance run observed, per partition, in
// the order it happened.
type timeline struct {
	Partitions int32
	Deliveries map[int32][]delivery
	Events     map[int32][]ownership
	Acked      map[int32][]int64
	// The baseline is [SteadyFrom, JoinAt]; the join window is
	// [JoinAt, WindowEnd], WindowEnd being when the run stopped watching.
	SteadyFrom, JoinAt, WindowEnd time.Time
	// Settle is how long after the group was stable the window extends.
	Settle   time.Duration
	Newcomer string
	// Slow names the slow member (or ""): its partitions' steady-state gap
	// is at least SlowMax, the longest processing time it may take.
	Slow    string
	SlowMax time.Duration
}

// partitionPause is one partition's longest gap in the join window, its
// longest gap in the baseline, and how much longer the first was.
type partitionPause struct {
	Partition      int32
	From, To       string // owner at the join, owner at the end
	Gap, Steady    time.Duration
	Extra          time.Duration
	StableAt       time.Time // zero when its final owner never consumed it
	FirstByFinalAt time.Time
}

// rebalanceResult is the verdict of one run.
type rebalanceResult struct {
	Moved, Unmoved []partitionPause
	// Pauses beyond the steady state (Extra), p50 and max.
	MovedP50, MovedMax     time.Duration
	UnmovedP50, UnmovedMax time.Duration
	// SteadyMax is the fast members' steady-state worst gap.
	SteadyMax      time.Duration
	Produced, Lost int
	Duplicates     int
	// JoinToStable: from the join until every partition was consumed
	// again by its final owner; Stable is false when one never was.
	JoinToStable time.Duration
	Stable       bool
	// NewcomerFirst: from the join to the newcomer's first record.
	NewcomerFirst time.Duration
}

// analyze computes the pauses, the join-to-stable time and the record
// accounting of tl.
//
// The join window runs from the join until Settle after the group was
// stable (every partition consumed again by its final owner), or until
// WindowEnd if it never was. A partition's pause is its longest gap
// overlapping that window minus the steady-state worst gap of the member
// that held it at the join (the longest gap of any of that member's
// partitions in the baseline); for the slow member's partitions the
// latter is at least SlowMax.
func analyze(tl timeline) rebalanceResult {
	r := rebalanceResult{Stable: true, NewcomerFirst: -1}
	pauses := make([]partitionPause, tl.Partitions)
	var stableAt time.Time
	for p := range tl.Partitions {
		pp := tl.ownersOf(p)
		if pp.StableAt.IsZero() {
			r.Stable = false
		} else if pp.StableAt.After(stableAt) {
			stableAt = pp.StableAt
		}
		pauses[p] = pp
	}
	windowEnd := tl.WindowEnd
	if r.Stable {
		r.JoinToStable = stableAt.Sub(tl.JoinAt)
		windowEnd = stableAt.Add(tl.Settle)
	}
	steady := tl.steadyByMember(pauses)
	for _, pp := range pauses {
		pp.Gap = windowGap(tl.Deliveries[pp.Partition], tl.JoinAt, windowEnd)
		pp.Steady = steady[pp.From]
		if tl.Slow != "" && (pp.From == tl.Slow || pp.To == tl.Slow) {
			pp.Steady = max(pp.Steady, tl.SlowMax)
		} else {
			r.SteadyMax = max(r.SteadyMax, pp.Steady)
		}
		pp.Extra = max(0, pp.Gap-pp.Steady)
		if pp.From != pp.To {
			r.Moved = append(r.Moved, pp)
		} else {
			r.Unmoved = append(r.Unmoved, pp)
		}
	}
	r.MovedP50, r.MovedMax = extraQuantiles(r.Moved)
	r.UnmovedP50, r.UnmovedMax = extraQuantiles(r.Unmoved)
	if first := tl.firstDeliveryBy(tl.Newcomer, tl.JoinAt); !first.IsZero() {
		r.NewcomerFirst = first.Sub(tl.JoinAt)
	}
	r.Produced, r.Lost, r.Duplicates = account(tl.Deliveries, tl.Acked)
	return r
}

// ownersOf finds partition p's owner at the join and at the end, and when
// its final owner consumed it again.
func (tl timeline) ownersOf(p int32) partitionPause {
	ds, evs := tl.Deliveries[p], tl.Events[p]
	pp := partitionPause{Partition: p, From: ownerAt(evs, tl.JoinAt), To: ownerAt(evs, tl.WindowEnd)}
	if pp.From == "" {
		pp.From = lastDeliveryBy(ds, tl.JoinAt)
	}
	pp.StableAt, pp.FirstByFinalAt = stableAt(ds, evs, pp.To, tl.JoinAt)
	return pp
}

// steadyByMember is each member's longest gap in the baseline over the
// partitions it held at the join.
func (tl timeline) steadyByMember(pauses []partitionPause) map[string]time.Duration {
	steady := map[string]time.Duration{}
	for _, pp := range pauses {
		steady[pp.From] = max(steady[pp.From], steadyGap(tl.Deliveries[pp.Partition], tl.SteadyFrom, tl.JoinAt))
	}
	return steady
}

// stableAt is when partition's final owner consumed it after its last
// grant: the join itself when the owner got it before the join (never
// stopped), else its first record after that grant; zero if none came.
func stableAt(ds []delivery, evs []ownership, owner string, joinAt time.Time) (stable, first time.Time) {
	if owner == "" {
		return time.Time{}, time.Time{}
	}
	var granted time.Time
	for _, e := range evs {
		if e.Held && e.Member == owner {
			granted = e.At
		}
	}
	for _, d := range ds {
		if d.Member == owner && !d.At.Before(granted) && !d.At.Before(joinAt) {
			first = d.At
			break
		}
	}
	if !granted.After(joinAt) {
		return joinAt, first
	}
	return first, first
}

// ownerAt is the member holding the partition at t by the hook calls: the
// latest member granted it and not since released ("" if none).
func ownerAt(evs []ownership, t time.Time) string {
	holders := map[string]time.Time{}
	for _, e := range evs {
		if e.At.After(t) {
			break
		}
		if e.Held {
			holders[e.Member] = e.At
		} else {
			delete(holders, e.Member)
		}
	}
	owner, latest := "", time.Time{}
	for m, at := range holders {
		if owner == "" || at.After(latest) || (at.Equal(latest) && m < owner) {
			owner, latest = m, at
		}
	}
	return owner
}

func lastDeliveryBy(ds []delivery, t time.Time) string {
	owner := ""
	for _, d := range ds {
		if d.At.After(t) {
			break
		}
		owner = d.Member
	}
	return owner
}

func (tl timeline) firstDeliveryBy(member string, from time.Time) time.Time {
	var first time.Time
	for _, ds := range tl.Deliveries {
		for _, d := range ds {
			if d.Member == member && !d.At.Before(from) && (first.IsZero() || d.At.Before(first)) {
				first = d.At
			}
		}
	}
	return first
}

// windowGap is the longest time between consecutive deliveries whose
// interval overlaps [from, to]; a partition still silent at to counts as
// paused until to.
func windowGap(ds []delivery, from, to time.Time) time.Duration {
	var longest time.Duration
	for i := 1; i < len(ds); i++ {
		prev, next := ds[i-1].At, ds[i].At
		if next.Before(from) || prev.After(to) {
			continue
		}
		longest = max(longest, next.Sub(prev))
	}
	if n := len(ds); n > 0 && ds[n-1].At.Before(to) {
		longest = max(longest, to.Sub(later(ds[n-1].At, from)))
	}
	return longest
}

// steadyGap is the longest time between consecutive deliveries both
// inside [from, to].
func steadyGap(ds []delivery, from, to time.Time) time.Duration {
	var longest time.Duration
	for i := 1; i < len(ds); i++ {
		prev, next := ds[i-1].At, ds[i].At
		if prev.Before(from) || next.After(to) {
			continue
		}
		longest = max(longest, next.Sub(prev))
	}
	return longest
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// extraQuantiles returns the median (lower) and the maximum Extra.
func extraQuantiles(ps []partitionPause) (p50, most time.Duration) {
	if len(ps) == 0 {
		return 0, 0
	}
	extras := make([]time.Duration, len(ps))
	for i, p := range ps {
		extras[i] = p.Extra
	}
	slices.Sort(extras)
	return extras[(len(extras)-1)/2], extras[len(extras)-1]
}

// account counts acknowledged records, those never delivered, and
// deliveries that repeated an offset already delivered.
func account(delivered map[int32][]delivery, acked map[int32][]int64) (produced, lost, duplicates int) {
	for p, offsets := range acked {
		seen := make(map[int64]bool, len(delivered[p]))
		for _, d := range delivered[p] {
			seen[d.Offset] = true
		}
		produced += len(offsets)
		for _, o := range offsets {
			if !seen[o] {
				lost++
			}
		}
	}
	for _, ds := range delivered {
		seen := make(map[int64]bool, len(ds))
		for _, d := range ds {
			if seen[d.Offset] {
				duplicates++
			}
			seen[d.Offset] = true
		}
	}
	return produced, lost, duplicates
}
