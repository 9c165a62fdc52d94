package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/capgate/capgate/internal/timeline"
)

// demoFailover is what `capgate dev --demo --replicas N --kill-leader D`
// shows: the leading coordinator stopped D into the demo, and the replica
// that took over. In this process the "kill" is the replica's Close (its
// Coordinator answers what it held 503 and stops writing); `kill -9` of a
// real process is e2e/ha's.
type demoFailover struct {
	Killed   string        // the replica stopped
	KilledAt time.Time     // when
	Leader   string        // the replica leading after it ("" if none by the end)
	Took     time.Duration // kill → the new leader serving, every other replica naming it
	Err      error
	// Pause is the longest pause of any partition (timeline.Pause) from
	// the stop until demoSettle after the takeover; Steady the longest
	// steady-state gap before the join, which it is compared with.
	Pause, Steady time.Duration
	// Changed is how many partitions were read by another member or
	// under another epoch after the stop than before it: none, when the
	// new leader kept every grant (members keep their sessions).
	Changed int
	// Warnings: Pause beyond demoFailoverPauseMax of Steady (judge).
	Warnings []string
}

// demoFailoverPauseMax is issue #11's target: no partition pauses more
// than this beyond its steady state across a failover. The demo prints
// a warning beyond it, never a failure: e2e/ha's BenchmarkFailover
// measures it.
const demoFailoverPauseMax = time.Second

// judge says what does not hold: the takeover. What the records say
// across it (nothing lost or repeated, every unmoved partition kept its
// holder and epoch to the end) is the demo's judge (judge, checkEpochs).
// It counts the partitions whose holder or epoch changed after the stop,
// measures the pause across the failover and warns beyond
// demoFailoverPauseMax.
func (f *demoFailover) judge(tl timeline.Timeline, reads demoReads, steady time.Duration) []string {
	if f.failed() {
		return []string{"no replica took over from the stopped leader"}
	}
	for p := range tl.Partitions {
		if _, after, _ := reads.around(p, f.KilledAt); len(after) > 0 {
			f.Changed++
		}
	}
	end := f.KilledAt.Add(f.Took + demoSettle)
	for p := range tl.Partitions {
		f.Pause = max(f.Pause, timeline.Pause(tl.Deliveries[p], f.KilledAt, end))
	}
	f.Steady = steady
	if f.Pause-steady > demoFailoverPauseMax {
		f.Warnings = append(f.Warnings, fmt.Sprintf("a partition paused %d ms across the failover, %d ms beyond the steady state (target <= %d ms); the demo cannot judge speed on a busy machine, e2e/ha's BenchmarkFailover measures it (not a failure)",
			f.Pause.Milliseconds(), (f.Pause-steady).Milliseconds(), demoFailoverPauseMax.Milliseconds()))
	}
	return nil
}

// killLeader stops the leader at the demo's start + after and waits for
// the takeover, printing both on the timeline.
func (d *demo) killLeader(ctx context.Context, after time.Duration) *demoFailover {
	f := &demoFailover{}
	if err := sleepUntil(ctx, d.start.Add(after)); err != nil {
		f.Err = err
		return f
	}
	// The leader at that moment; should a takeover be in progress (a
	// busy machine can let a lease lapse), the one it ends with.
	co, err := d.cfg.Stack.WaitLeader(ctx)
	if err != nil {
		f.Err = fmt.Errorf("no coordinator led at +%s: %w", after, err)
		d.event(time.Now(), "failover: no leader to stop")
		return f
	}
	f.Killed, f.KilledAt = co.Name, time.Now()
	d.event(f.KilledAt, "failover: %s (leader) stopped", co.Name)
	co.Kill()
	next, err := d.cfg.Stack.WaitLeader(ctx)
	if err != nil {
		f.Err = err
		return f
	}
	f.Leader, f.Took = next.Name, time.Since(f.KilledAt)
	d.event(time.Now(), "failover: %s leads, %d ms after the stop", next.Name, f.Took.Milliseconds())
	return f
}

// print writes the failover's summary line; a missing takeover is a
// failure of the demo.
func (f *demoFailover) print(w io.Writer) {
	if f == nil {
		return
	}
	if f.Err != nil || f.Leader == "" {
		fmt.Fprintf(w, "failover:           FAILED: %v\n", f.Err)
		return
	}
	fmt.Fprintf(w, "failover:           %s stopped, %s leading %d ms later (fenced the old writer, read the log to its end; members kept their sessions); partitions that changed holder or epoch across it: %d; longest pause of any partition across it %d ms (steady state %d ms)\n",
		f.Killed, f.Leader, f.Took.Milliseconds(), f.Changed, f.Pause.Milliseconds(), f.Steady.Milliseconds())
}

func (f *demoFailover) failed() bool { return f != nil && (f.Err != nil || f.Leader == "") }
