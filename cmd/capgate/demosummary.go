package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// The demo's judgement, kept free of IO and clocks so it can be tested on
// made-up timelines: what paused, for how long, and what was lost or
// repeated.

// observation is one consumed record: when it was handed to the demo and
// its offset.
type observation struct {
	at     time.Time
	offset int64
}

// summaryInput is what the demo saw. Observations are per partition in
// consumption order (only records of this run).
type summaryInput struct {
	Observed map[int32][]observation
	// Acked lists the offsets the broker acknowledged, per partition.
	Acked map[int32][]int64
	// Moved are the partitions whose holder changed after JoinAt.
	Moved map[int32]bool
	// The baseline is [SteadyAt, JoinAt); the join window is
	// [JoinAt, WindowEnd].
	SteadyAt, JoinAt, WindowEnd time.Time
	Partitions                  int32
	ExpectedMoves               int
	Tolerance                   time.Duration
}

// demoSummary is the demo's verdict; Failures is empty when it holds.
type demoSummary struct {
	Moved           []int32
	MovedP50        time.Duration
	MovedMax        time.Duration
	Unmoved         int
	UnmovedMax      time.Duration
	SteadyMax       time.Duration
	UnmovedMaxExtra time.Duration
	Produced        int
	Consumed        int
	Lost            int
	Duplicates      int
	ExpectedMoves   int
	Tolerance       time.Duration
	Failures        []string
}

func (s demoSummary) ok() bool { return len(s.Failures) == 0 }

// summarize computes the pauses and the record accounting, then judges:
// the expected number of partitions moved, no unmoved partition paused
// more than Tolerance beyond the steady state's longest gap, nothing lost,
// nothing repeated.
func summarize(in summaryInput) demoSummary {
	s := demoSummary{ExpectedMoves: in.ExpectedMoves, Tolerance: in.Tolerance}
	var movedPauses []time.Duration
	for p := range in.Partitions {
		obs := in.Observed[p]
		s.SteadyMax = max(s.SteadyMax, longestGap(obs, in.SteadyAt, in.JoinAt))
		pause := longestGap(obs, in.JoinAt, in.WindowEnd)
		if in.Moved[p] {
			s.Moved = append(s.Moved, p)
			movedPauses = append(movedPauses, pause)
			continue
		}
		s.Unmoved++
		s.UnmovedMax = max(s.UnmovedMax, pause)
	}
	if len(movedPauses) > 0 {
		slices.Sort(movedPauses)
		s.MovedP50 = movedPauses[(len(movedPauses)-1)/2]
		s.MovedMax = movedPauses[len(movedPauses)-1]
	}
	s.UnmovedMaxExtra = max(0, s.UnmovedMax-s.SteadyMax)
	s.Produced, s.Consumed, s.Lost, s.Duplicates = account(in.Observed, in.Acked)
	s.Failures = judge(s)
	return s
}

func judge(s demoSummary) []string {
	var failures []string
	if len(s.Moved) != s.ExpectedMoves {
		failures = append(failures, fmt.Sprintf("%d partitions moved, want %d (the newcomer's share, nothing more)", len(s.Moved), s.ExpectedMoves))
	}
	if s.UnmovedMaxExtra > s.Tolerance {
		failures = append(failures, fmt.Sprintf("an unmoved partition paused %d ms beyond the steady state (tolerance %d ms)", s.UnmovedMaxExtra.Milliseconds(), s.Tolerance.Milliseconds()))
	}
	if s.Lost > 0 {
		failures = append(failures, fmt.Sprintf("%d acknowledged records were never consumed", s.Lost))
	}
	if s.Duplicates > 0 {
		failures = append(failures, fmt.Sprintf("%d records were consumed more than once", s.Duplicates))
	}
	if s.Produced == 0 {
		failures = append(failures, "no record was produced")
	}
	return failures
}

// longestGap is the longest time between consecutive observations whose
// interval overlaps [from, to]; a partition still silent at to counts as
// paused until to.
func longestGap(obs []observation, from, to time.Time) time.Duration {
	var longest time.Duration
	for i := 1; i < len(obs); i++ {
		prev, next := obs[i-1].at, obs[i].at
		if next.Before(from) || prev.After(to) {
			continue
		}
		longest = max(longest, next.Sub(prev))
	}
	if n := len(obs); n > 0 && obs[n-1].at.Before(to) && !obs[n-1].at.Before(from) {
		longest = max(longest, to.Sub(obs[n-1].at))
	}
	return longest
}

// account counts acknowledged records, how many of them were consumed,
// how many were not, and how many consumptions repeated an offset.
func account(observed map[int32][]observation, acked map[int32][]int64) (produced, consumed, lost, duplicates int) {
	for p, offsets := range acked {
		seen := make(map[int64]bool, len(observed[p]))
		for _, o := range observed[p] {
			seen[o.offset] = true
		}
		produced += len(offsets)
		for _, off := range offsets {
			if seen[off] {
				consumed++
			} else {
				lost++
			}
		}
	}
	for _, obs := range observed {
		seen := make(map[int64]bool, len(obs))
		for _, o := range obs {
			if seen[o.offset] {
				duplicates++
			}
			seen[o.offset] = true
		}
	}
	return produced, consumed, lost, duplicates
}

// print writes the human summary and the machine-checkable last line.
func (s demoSummary) print(w io.Writer, topic string) {
	names := make([]string, len(s.Moved))
	for i, p := range s.Moved {
		names[i] = fmt.Sprintf("%s/%d", topic, p)
	}
	fmt.Fprintf(w, "\nmoved partitions:   %d (%s)  pause p50 %d ms, max %d ms  (DESIGN target: p50 <= 20 ms, max <= 100 ms)\n",
		len(s.Moved), strings.Join(names, " "), s.MovedP50.Milliseconds(), s.MovedMax.Milliseconds())
	fmt.Fprintf(w, "unmoved partitions: %d  longest gap %d ms; steady state %d ms; beyond steady state %d ms (tolerance %d ms)\n",
		s.Unmoved, s.UnmovedMax.Milliseconds(), s.SteadyMax.Milliseconds(), s.UnmovedMaxExtra.Milliseconds(), s.Tolerance.Milliseconds())
	fmt.Fprintf(w, "records:            produced %d, consumed %d, lost %d, duplicates %d\n", s.Produced, s.Consumed, s.Lost, s.Duplicates)
	for _, f := range s.Failures {
		fmt.Fprintf(w, "FAILED: %s\n", f)
	}
	fmt.Fprintf(w, "summary: moved=%d moved_p50_ms=%d moved_max_ms=%d unmoved_max_extra_ms=%d lost=%d duplicates=%d steady_max_ms=%d unmoved_max_ms=%d produced=%d consumed=%d ok=%t\n",
		len(s.Moved), s.MovedP50.Milliseconds(), s.MovedMax.Milliseconds(), s.UnmovedMaxExtra.Milliseconds(), s.Lost, s.Duplicates,
		s.SteadyMax.Milliseconds(), s.UnmovedMax.Milliseconds(), s.Produced, s.Consumed, s.ok())
}
