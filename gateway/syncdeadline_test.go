package gateway

import (
	"testing"
	"time"
)

// TestPollDeadline: a poll to a replica gone silent is given up in time
// for the next replica's answer, held up to sync_wait, to arrive before
// the self-fence at sync_timeout after the last good poll was sent; a
// poll is always given sync_wait and a margin, and never more than
// sync_timeout.
func TestPollDeadline(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	s := time.Second
	cases := []struct {
		name                   string
		sent, lastGood         time.Time
		wait, timeout, wantOff time.Duration // deadline − sent
	}{
		{"defaults, right after a good poll", t0.Add(3 * s), t0, 3 * s, 10 * s, 3500 * time.Millisecond},
		{"test timing", t0.Add(s / 2), t0, s / 2, 5 * s, 3500 * time.Millisecond},
		{"late in the window: sync_wait and a margin at least", t0.Add(8 * s), t0, 3 * s, 10 * s, 3250 * time.Millisecond},
		{"a long sync_timeout", t0.Add(s), t0.Add(s), s, 30 * s, 28500 * time.Millisecond},
	}
	for _, c := range cases {
		got := pollDeadline(c.sent, c.lastGood, c.wait, c.timeout).Sub(c.sent)
		if got != c.wantOff {
			t.Errorf("%s: deadline %v after sending, want %v", c.name, got, c.wantOff)
		}
		// Given up at the deadline, the next replica's answer comes by
		// deadline + sync_wait: before the self-fence whenever the poll
		// went out early enough to leave it the room.
		if next, fence := c.sent.Add(got+c.wait), c.lastGood.Add(c.timeout); c.wantOff != c.wait+250*time.Millisecond && !next.Before(fence) {
			t.Errorf("%s: the next replica's answer (by %v) would come after the self-fence (%v)", c.name, next.Sub(t0), fence.Sub(t0))
		}
	}
}
