package timeline

import "time"

// Pause is THE definition of a pause, used by `capgate dev --demo`, the
// end-to-end suites, the benchmarks, README.md and BENCHMARKS.md alike:
//
// The pause of a partition over a window [from, to] is the longest time
// between two consecutive records of that partition handed to the
// application (the time its consumer's Poll returned them), taken over
// every such interval that overlaps the window and counted whole, not cut
// at the window's edges. A partition still silent at `to` counts as
// paused from its last record until `to`, however long before the window
// that record came; one that never had a record counts the whole window.
//
// ds are the partition's deliveries in the order they happened (any
// member); only At is read.
//
// "Beyond the steady state" (Analysis.Extra) is a pause minus the longest
// gap of the same holder before the window (SteadyGap): what a rebalance
// added to the partition's normal rhythm.
func Pause(ds []Delivery, from, to time.Time) time.Duration {
	if len(ds) == 0 {
		return to.Sub(from)
	}
	var longest time.Duration
	for i := 1; i < len(ds); i++ {
		prev, next := ds[i-1].At, ds[i].At
		if next.Before(from) || prev.After(to) {
			continue
		}
		longest = max(longest, next.Sub(prev))
	}
	if last := ds[len(ds)-1].At; last.Before(to) {
		longest = max(longest, to.Sub(last))
	}
	return longest
}

// SteadyGap is the longest time between two consecutive deliveries both
// inside [from, to]: a partition's normal rhythm over a baseline, which
// Pause is compared with.
func SteadyGap(ds []Delivery, from, to time.Time) time.Duration {
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
