package main

import (
	"fmt"
	"io"
	"time"

	"github.com/capgate/capgate/internal/timeline"
)

// demoSummary is the demo's verdict on a timeline.Analysis; Failures is
// empty when it holds.
type demoSummary struct {
	timeline.Analysis
	ExpectedMoves int
	Tolerance     time.Duration
	Failures      []string
}

func (s demoSummary) ok() bool { return len(s.Failures) == 0 }

// judge: the expected number of partitions moved (the newcomer's share,
// nothing more), the group stable again, no unmoved partition paused more
// than tolerance beyond its holder's steady state, nothing lost, nothing
// repeated.
func judge(a timeline.Analysis, expectedMoves int, tolerance time.Duration) demoSummary {
	s := demoSummary{Analysis: a, ExpectedMoves: expectedMoves, Tolerance: tolerance}
	fail := func(format string, args ...any) { s.Failures = append(s.Failures, fmt.Sprintf(format, args...)) }
	if len(a.Moved) != expectedMoves {
		fail("%d partitions moved, want %d (the newcomer's share, nothing more)", len(a.Moved), expectedMoves)
	}
	if !a.Stable {
		fail("the group was not consuming every partition again before the end")
	}
	if a.UnmovedExtra.Max > tolerance {
		fail("an unmoved partition paused %d ms beyond the steady state (tolerance %d ms)", a.UnmovedExtra.Max.Milliseconds(), tolerance.Milliseconds())
	}
	if a.Lost > 0 {
		fail("%d acknowledged records were never consumed", a.Lost)
	}
	if a.Duplicates > 0 {
		fail("%d records were consumed more than once", a.Duplicates)
	}
	if a.Produced == 0 {
		fail("no record was produced")
	}
	return s
}

// print writes the pause of every moved partition, the human summary and
// the machine-checkable last line. A pause is timeline.Pause: the longest
// time between two records of the partition handed to a consumer, over
// the join window; "beyond" subtracts its holder's longest gap before
// the join.
func (s demoSummary) print(w io.Writer, topic string, failover *demoFailover) {
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	fmt.Fprintln(w)
	for _, p := range s.Moved {
		fmt.Fprintf(w, "  %s/%-3d %s -> %s   pause %4d ms   (steady %d ms, beyond %d ms)\n", topic, p.Partition, p.From, p.To, ms(p.Pause), ms(p.Steady), ms(p.Extra))
	}
	fmt.Fprintf(w, "\nmoved partitions:   %d  pause p50 %d ms, max %d ms; beyond the steady state p50 %d ms, max %d ms  (DESIGN target: p50 <= 20 ms, max <= 100 ms beyond)\n",
		len(s.Moved), ms(s.MovedPause.P50), ms(s.MovedPause.Max), ms(s.MovedExtra.P50), ms(s.MovedExtra.Max))
	fmt.Fprintf(w, "unmoved partitions: %d  pause max %d ms; steady state %d ms; beyond it max %d ms (tolerance %d ms)\n",
		len(s.Unmoved), ms(s.UnmovedPause.Max), ms(s.SteadyMax), ms(s.UnmovedExtra.Max), ms(s.Tolerance))
	fmt.Fprintf(w, "group:              stable again %d ms after the join; newcomer's first record after %d ms\n", ms(s.JoinToStable), ms(s.NewcomerFirst))
	fmt.Fprintf(w, "records:            produced %d, consumed %d, lost %d, duplicates %d\n", s.Produced, s.Delivered, s.Lost, s.Duplicates)
	failover.print(w)
	for _, f := range s.Failures {
		fmt.Fprintf(w, "FAILED: %s\n", f)
	}
	fmt.Fprintf(w, "summary: moved=%d moved_pause_p50_ms=%d moved_pause_max_ms=%d moved_beyond_max_ms=%d unmoved_beyond_max_ms=%d lost=%d duplicates=%d steady_max_ms=%d unmoved_pause_max_ms=%d join_to_stable_ms=%d produced=%d consumed=%d ok=%t\n",
		len(s.Moved), ms(s.MovedPause.P50), ms(s.MovedPause.Max), ms(s.MovedExtra.Max), ms(s.UnmovedExtra.Max), s.Lost, s.Duplicates,
		ms(s.SteadyMax), ms(s.UnmovedPause.Max), ms(s.JoinToStable), s.Produced, s.Delivered, s.ok())
}
