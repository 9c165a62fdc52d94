package main

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/capgate/capgate/client"
)

// tracker collects what the demo's consumers receive and what its producer
// had acknowledged, prints each handoff as it shows in the records (the
// first record of a partition consumed by a new holder), and hands the
// lot to summarize. Safe for concurrent use.
type tracker struct {
	runID []byte // the key of this run's records
	start time.Time
	out   io.Writer

	mu       sync.Mutex
	parts    map[int32]*partitionTrack
	acked    map[int32][]int64
	joinAt   time.Time // zero until the newcomer joins
	moved    map[int32]bool
	lastMove time.Time // the latest handoff or grant
}

type partitionTrack struct {
	owner string
	obs   []observation
}

func newTracker(runID []byte, start time.Time, out io.Writer) *tracker {
	return &tracker{runID: runID, start: start, out: out, parts: map[int32]*partitionTrack{}, acked: map[int32][]int64{}, moved: map[int32]bool{}}
}

// since formats t relative to the demo's start.
func (t *tracker) since(at time.Time) string {
	return fmt.Sprintf("+%6.3fs", at.Sub(t.start).Seconds())
}

// printf writes one timeline line; the caller holds mu.
func (t *tracker) printf(at time.Time, format string, args ...any) {
	fmt.Fprintf(t.out, "  %s  %s\n", t.since(at), fmt.Sprintf(format, args...))
}

// event prints a line that is not about one partition.
func (t *tracker) event(at time.Time, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.printf(at, format, args...)
}

// observe records what consumer received at now; a partition whose
// previous record went to another consumer has been handed over.
func (t *tracker) observe(consumer string, records []client.Record, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range records {
		if !bytes.Equal(r.Key, t.runID) {
			continue // left over from an earlier run
		}
		pt := t.parts[r.Partition]
		if pt == nil {
			pt = &partitionTrack{}
			t.parts[r.Partition] = pt
		}
		if pt.owner != "" && pt.owner != consumer {
			last := pt.obs[len(pt.obs)-1].at
			t.printf(now, "%s/%-3d %s -> %s   pause %4d ms", r.Topic, r.Partition, pt.owner, consumer, now.Sub(last).Milliseconds())
			t.noteMoveLocked(r.Partition, now)
		}
		pt.owner = consumer
		pt.obs = append(pt.obs, observation{at: now, offset: r.Offset})
	}
}

// granted notes partitions granted to consumer (the newcomer's grants
// count as moves even before its first record arrives).
func (t *tracker) granted(ps []client.Partition, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range ps {
		t.noteMoveLocked(p.Partition, now)
	}
}

func (t *tracker) noteMoveLocked(partition int32, now time.Time) {
	t.lastMove = now
	if !t.joinAt.IsZero() && !now.Before(t.joinAt) {
		t.moved[partition] = true
	}
}

// produced records an acknowledged offset.
func (t *tracker) produced(partition int32, offset int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.acked[partition] = append(t.acked[partition], offset)
}

// markJoin starts the join window.
func (t *tracker) markJoin(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.joinAt = at
}

// steady reports whether every one of partitions received a record since
// `since` and nothing moved since then.
func (t *tracker) steady(partitions int32, since time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lastMove.After(since) {
		return false
	}
	for p := range partitions {
		pt := t.parts[p]
		if pt == nil || len(pt.obs) == 0 || pt.obs[len(pt.obs)-1].at.Before(since) {
			return false
		}
	}
	return true
}

// drained reports whether every acknowledged offset was consumed.
func (t *tracker) drained() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p, offsets := range t.acked {
		pt := t.parts[p]
		if len(offsets) == 0 {
			continue
		}
		if pt == nil || !slices.ContainsFunc(pt.obs, func(o observation) bool { return o.offset == offsets[len(offsets)-1] }) {
			return false
		}
	}
	return true
}

// lastMoveAt is when the latest handoff or grant was seen.
func (t *tracker) lastMoveAt() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastMove
}

// input copies what summarize needs.
func (t *tracker) input() summaryInput {
	t.mu.Lock()
	defer t.mu.Unlock()
	in := summaryInput{Observed: map[int32][]observation{}, Acked: map[int32][]int64{}, Moved: map[int32]bool{}, JoinAt: t.joinAt}
	for p, pt := range t.parts {
		in.Observed[p] = slices.Clone(pt.obs)
	}
	for p, offsets := range t.acked {
		in.Acked[p] = slices.Clone(offsets)
	}
	for p := range t.moved {
		in.Moved[p] = true
	}
	return in
}
