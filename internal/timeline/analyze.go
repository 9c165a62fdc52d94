package timeline

import (
	"slices"
	"time"
)

// Window is a rebalance run's phases: the baseline is [SteadyFrom,
// JoinAt]; the join window runs from JoinAt until Settle after the group
// was stable again, or until End (when the run stopped watching) if it
// never was.
type Window struct {
	SteadyFrom, JoinAt, End time.Time
	Settle                  time.Duration
	// Newcomer is the member that joined at JoinAt.
	Newcomer string
	// Slow names a slow member (or ""): its partitions' steady-state gap
	// is at least SlowMax, the longest it may take to process a poll.
	Slow    string
	SlowMax time.Duration
}

// Partition is one partition's verdict.
type Partition struct {
	Partition int32
	From, To  string // holder at the join, holder at the end
	// Pause over the join window (see Pause), Steady the steady-state
	// worst gap of its holder at the join, Extra = max(0, Pause − Steady).
	Pause, Steady, Extra time.Duration
	// StableAt is when its final holder consumed it after its last grant
	// (the join itself if it never stopped); zero if it never did.
	StableAt time.Time
}

// Moved reports whether the partition's holder changed.
func (p Partition) Moved() bool { return p.From != p.To }

// Quantiles are the median (lower) and the maximum of a set of durations.
type Quantiles struct{ P50, Max time.Duration }

// Analysis is the verdict of one run.
type Analysis struct {
	Moved, Unmoved []Partition // by partition number
	// Pauses of moved and unmoved partitions, raw and beyond the steady
	// state.
	MovedPause, MovedExtra     Quantiles
	UnmovedPause, UnmovedExtra Quantiles
	// SteadyMax is the worst steady-state gap over the fast members.
	SteadyMax time.Duration
	// Produced: acknowledged records; Delivered: of those, delivered at
	// least once; Lost: never delivered; Duplicates: deliveries repeating
	// an offset already delivered.
	Produced, Delivered, Lost, Duplicates int
	// JoinToStable: from the join until every partition was consumed again
	// by its final holder; Stable is false when one never was.
	JoinToStable time.Duration
	Stable       bool
	// NewcomerFirst: from the join to the newcomer's first record (−1:
	// none).
	NewcomerFirst time.Duration
}

// Analyze computes every partition's pause, the join-to-stable time and
// the record accounting of tl over w.
func Analyze(tl Timeline, w Window) Analysis {
	a := Analysis{Stable: true, NewcomerFirst: -1}
	parts := make([]Partition, tl.Partitions)
	var stableAt time.Time
	for p := range tl.Partitions {
		parts[p] = tl.owners(p, w)
		if parts[p].StableAt.IsZero() {
			a.Stable = false
		} else if parts[p].StableAt.After(stableAt) {
			stableAt = parts[p].StableAt
		}
	}
	end := w.End
	if a.Stable {
		a.JoinToStable = stableAt.Sub(w.JoinAt)
		end = stableAt.Add(w.Settle)
	}
	steady := tl.steadyByMember(parts, w)
	for _, pp := range parts {
		pp.Pause = Pause(tl.Deliveries[pp.Partition], w.JoinAt, end)
		pp.Steady = steady[pp.From]
		if w.Slow != "" && (pp.From == w.Slow || pp.To == w.Slow) {
			pp.Steady = max(pp.Steady, w.SlowMax)
		} else {
			a.SteadyMax = max(a.SteadyMax, pp.Steady)
		}
		pp.Extra = max(0, pp.Pause-pp.Steady)
		if pp.Moved() {
			a.Moved = append(a.Moved, pp)
		} else {
			a.Unmoved = append(a.Unmoved, pp)
		}
	}
	a.MovedPause, a.MovedExtra = quantiles(a.Moved)
	a.UnmovedPause, a.UnmovedExtra = quantiles(a.Unmoved)
	if first := tl.firstDeliveryBy(w.Newcomer, w.JoinAt); !first.IsZero() {
		a.NewcomerFirst = first.Sub(w.JoinAt)
	}
	a.Produced, a.Delivered, a.Lost, a.Duplicates = Account(tl.Deliveries, tl.Acked)
	return a
}

// owners finds partition p's holder at the join and at the end, and when
// its final holder consumed it again.
func (tl Timeline) owners(p int32, w Window) Partition {
	ds, evs := tl.Deliveries[p], tl.Events[p]
	pp := Partition{Partition: p, From: OwnerAt(evs, w.JoinAt), To: OwnerAt(evs, w.End)}
	if pp.From == "" {
		pp.From = lastDeliveryBy(ds, w.JoinAt)
	}
	pp.StableAt = stableAt(ds, evs, pp.To, w.JoinAt)
	return pp
}

// steadyByMember is each member's longest baseline gap over the
// partitions it held at the join.
func (tl Timeline) steadyByMember(parts []Partition, w Window) map[string]time.Duration {
	steady := map[string]time.Duration{}
	for _, pp := range parts {
		steady[pp.From] = max(steady[pp.From], SteadyGap(tl.Deliveries[pp.Partition], w.SteadyFrom, w.JoinAt))
	}
	return steady
}

// stableAt is when the partition's final holder consumed it after its
// last grant: the join itself when the holder got it before the join
// (never stopped), else its first record after that grant; zero if none
// came.
func stableAt(ds []Delivery, evs []Ownership, owner string, joinAt time.Time) time.Time {
	if owner == "" {
		return time.Time{}
	}
	var granted time.Time
	for _, e := range evs {
		if e.Held && e.Member == owner {
			granted = e.At
		}
	}
	if !granted.After(joinAt) {
		return joinAt
	}
	for _, d := range ds {
		if d.Member == owner && !d.At.Before(granted) {
			return d.At
		}
	}
	return time.Time{}
}

func lastDeliveryBy(ds []Delivery, t time.Time) string {
	owner := ""
	for _, d := range ds {
		if d.At.After(t) {
			break
		}
		owner = d.Member
	}
	return owner
}

func (tl Timeline) firstDeliveryBy(member string, from time.Time) time.Time {
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

// quantiles returns the median (lower) and maximum Pause and Extra.
func quantiles(ps []Partition) (pause, extra Quantiles) {
	if len(ps) == 0 {
		return Quantiles{}, Quantiles{}
	}
	pauses, extras := make([]time.Duration, len(ps)), make([]time.Duration, len(ps))
	for i, p := range ps {
		pauses[i], extras[i] = p.Pause, p.Extra
	}
	return quantilesOf(pauses), quantilesOf(extras)
}

func quantilesOf(ds []time.Duration) Quantiles {
	slices.Sort(ds)
	return Quantiles{P50: ds[(len(ds)-1)/2], Max: ds[len(ds)-1]}
}

// Account counts acknowledged records, those delivered at least once,
// those never delivered, and deliveries repeating an offset.
func Account(delivered map[int32][]Delivery, acked map[int32][]int64) (produced, consumed, lost, duplicates int) {
	for p, offsets := range acked {
		seen := make(map[int64]bool, len(delivered[p]))
		for _, d := range delivered[p] {
			seen[d.Offset] = true
		}
		produced += len(offsets)
		for _, o := range offsets {
			if seen[o] {
				consumed++
			} else {
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
	return produced, consumed, lost, duplicates
}
