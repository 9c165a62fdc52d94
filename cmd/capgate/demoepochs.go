package main

import (
	"fmt"
	"time"

	"github.com/capgate/capgate/internal/timeline"
)

// demoReads is what the demo's records say about authority: per
// partition, the runs of consecutive records read by one member under
// one capability epoch (client.Record.Epoch, the epoch of the capability
// the gateway admitted the fetch under), in the order they were handed
// to the application. Every grant carries a fresh epoch and a renewal
// keeps it, so a partition that was revoked, fenced or granted again
// shows a new run; one that kept its run was never touched.
type demoReads map[int32][]demoRun

// demoRun is one run: records of the partition read by Member under
// Epoch, the first of them handed over at From.
type demoRun struct {
	Member string
	Epoch  uint64
	From   time.Time
	Count  int
}

// add records one delivered record.
func (r demoReads) add(partition int32, member string, epoch uint64, at time.Time) {
	runs := r[partition]
	if n := len(runs); n > 0 && runs[n-1].Member == member && runs[n-1].Epoch == epoch {
		runs[n-1].Count++
		return
	}
	r[partition] = append(runs, demoRun{Member: member, Epoch: epoch, From: at, Count: 1})
}

// copy is a deep copy (the demo reads it while consumers may still add).
func (r demoReads) copy() demoReads {
	out := make(demoReads, len(r))
	for p, runs := range r {
		out[p] = append([]demoRun(nil), runs...)
	}
	return out
}

// around splits a partition's runs at the join: the run in force at the
// join (the last one whose first record came before it; ok false when
// none did) and every run after it.
func (r demoReads) around(partition int32, joinAt time.Time) (at demoRun, after []demoRun, ok bool) {
	runs := r[partition]
	i := -1
	for j, run := range runs {
		if run.From.After(joinAt) {
			break
		}
		i = j
	}
	if i < 0 {
		return demoRun{}, runs, false
	}
	return runs[i], runs[i+1:], true
}

// demoEpochs is the timing-independent verdict on the join: which
// partitions the rebalance touched, from the epochs their records were
// read under, not from how long anything took.
type demoEpochs struct {
	// UnmovedChanged: unmoved partitions whose records after the join
	// came from another holder or under another epoch than the ones
	// before it (each such change is a revoke, fence or new grant).
	UnmovedChanged []string
	// MovedBad: moved partitions that did not change hands exactly once,
	// from their holder at the join to their final holder, under a
	// higher epoch.
	MovedBad []string
	// Handoffs: the epoch change of each moved partition that did
	// (keyed by partition).
	Handoffs map[int32][2]uint64
}

// checkEpochs judges every partition of a (Analyze's moved and unmoved
// sets) by reads around joinAt.
func checkEpochs(a timeline.Analysis, reads demoReads, joinAt time.Time) demoEpochs {
	var e demoEpochs
	e.Handoffs = map[int32][2]uint64{}
	for _, p := range a.Unmoved {
		at, after, ok := reads.around(p.Partition, joinAt)
		switch {
		case !ok:
			e.UnmovedChanged = append(e.UnmovedChanged, fmt.Sprintf("%d (no record before the join)", p.Partition))
		case at.Member != p.From:
			e.UnmovedChanged = append(e.UnmovedChanged, fmt.Sprintf("%d (read by %s at the join, held by %s)", p.Partition, at.Member, p.From))
		case len(after) > 0:
			e.UnmovedChanged = append(e.UnmovedChanged, fmt.Sprintf("%d (%s)", p.Partition, describeRuns(at, after)))
		}
	}
	for _, p := range a.Moved {
		at, after, ok := reads.around(p.Partition, joinAt)
		switch {
		case !ok:
			e.MovedBad = append(e.MovedBad, fmt.Sprintf("%d (no record before the join)", p.Partition))
		case len(after) != 1:
			e.MovedBad = append(e.MovedBad, fmt.Sprintf("%d (%d changes after the join, want 1: %s)", p.Partition, len(after), describeRuns(at, after)))
		case after[0].Member != p.To || at.Member == p.To:
			e.MovedBad = append(e.MovedBad, fmt.Sprintf("%d (%s, but it moved %s -> %s)", p.Partition, describeRuns(at, after), p.From, p.To))
		case after[0].Epoch <= at.Epoch:
			e.MovedBad = append(e.MovedBad, fmt.Sprintf("%d (%s: the epoch did not rise)", p.Partition, describeRuns(at, after)))
		default:
			e.Handoffs[p.Partition] = [2]uint64{at.Epoch, after[0].Epoch}
		}
	}
	return e
}

// describeRuns is "c1@4 -> c4@9 -> ...".
func describeRuns(at demoRun, after []demoRun) string {
	s := fmt.Sprintf("%s@%d", at.Member, at.Epoch)
	for _, r := range after {
		s += fmt.Sprintf(" -> %s@%d", r.Member, r.Epoch)
	}
	return s
}
