package harness

import (
	"fmt"
	"time"
)

// Time is a point on the harness timeline: nanoseconds of the machine's
// monotonic clock (CLOCK_MONOTONIC on Linux), which every process on the
// machine shares. Consumer processes stamp their output with it, so their
// events line up with the test's own; gateway trace lines carry wall-clock
// times and are converted with FromWall.
type Time int64

// Now reads the harness timeline.
func Now() Time { return Time(monotonicNanos()) }

// wallOffset is wall-clock ns minus monotonic ns now: the midpoint of
// two monotonic reads around a wall read. It is read afresh at every
// conversion, not once: this machine's wall clock is stepped now and then
// (no NTP in the VM: the host sets it), and with an offset read at start
// every gateway trace time after a step sat tens of ms off the monotonic
// timeline — CI once saw every e2e/faults test fail "no admit after ack"
// by 3–40 ms at once. A conversion is off now only if the clock steps
// between the traced moment and its conversion (milliseconds: a trace
// line is converted as it is written or read).
func wallOffset() int64 {
	before := monotonicNanos()
	wall := time.Now().UnixNano()
	after := monotonicNanos()
	return wall - (before+after)/2
}

// FromWall converts a wall-clock time (a gateway's trace line, a token's
// exp) to the timeline. The zero time converts to 0.
func FromWall(t time.Time) Time {
	if t.IsZero() {
		return 0
	}
	return Time(t.UnixNano() - wallOffset())
}

// Wall converts a timeline point back to wall-clock time.
func (t Time) Wall() time.Time { return time.Unix(0, int64(t)+wallOffset()) }

// Add returns t + d.
func (t Time) Add(d time.Duration) Time { return t + Time(d) }

// Sub returns t − u.
func (t Time) Sub(u Time) time.Duration { return time.Duration(t - u) }

// Since is the time elapsed since t.
func Since(t Time) time.Duration { return Now().Sub(t) }

// String renders the wall-clock time of day with milliseconds.
func (t Time) String() string {
	if t == 0 {
		return "never"
	}
	return t.Wall().Format("15:04:05.000")
}

// GoString keeps %#v readable in failure messages.
func (t Time) GoString() string { return fmt.Sprintf("harness.Time(%s)", t) }
