package gateway

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/coordinators/coordinatorstest"
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
		got := pollDeadline(c.sent, c.lastGood, c.wait, c.timeout, 0).Sub(c.sent)
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

// TestPollDeadlineGrowsWithSilentPolls: once the gateway has fallen
// behind, each poll given up unanswered in a row doubles the margin past
// sync_wait (0.25, 0.5, 1, 2 s …), up to sync_timeout.
func TestPollDeadlineGrowsWithSilentPolls(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	s, ms := time.Second, time.Millisecond
	sent := t0.Add(20 * s) // long past the last good poll
	for silent, want := range []time.Duration{750 * ms, 1000 * ms, 1500 * ms, 2500 * ms, 4500 * ms, 5 * s, 5 * s} {
		if got := pollDeadline(sent, t0, s/2, 5*s, silent).Sub(sent); got != want {
			t.Errorf("after %d silent polls: deadline %v after sending, want %v", silent, got, want)
		}
	}
	if got := pollDeadline(sent, t0, s/2, 5*s, 1000).Sub(sent); got != 5*s {
		t.Errorf("after 1000 silent polls: deadline %v after sending, want sync_timeout", got)
	}
}

// TestSyncCatchesUpWithASlowLeader: a gateway that fell behind (the
// leader failing its polls past sync_timeout) resyncs with a leader that
// answers every poll only after 1 s — sync_wait (300 ms) and more than
// the 250 ms margin — as a leader confirming its answers with a commit
// of a starved log does. With the margin fixed it gave up every poll at
// 550 ms, asked the standby, came back, and refused fetches out_of_sync
// for as long as the leader stayed that slow (e2e/ha at load 20-27).
func TestSyncCatchesUpWithASlowLeader(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{
		edit: func(c *Config) {
			srv, _ := coordinatorstest.Standby(t, c.CoordinatorURL, true)
			c.CoordinatorURL = srv.URL + "," + c.CoordinatorURL
		},
	})
	h.waitReady()
	h.sync.setFailing(true)
	waitFor(t, "the gateway out of sync", func() bool { return h.gw.syncRefusal(time.Now()) != "" })
	h.sync.setOnPoll(func(uint64) { time.Sleep(time.Second) }) // a slow leader, not a wait
	h.sync.setFailing(false)
	seq := h.sync.push(api.SyncResponse{})
	h.sync.waitAck(t, seq) // within 10 s: the gateway applied seq
	if code := h.gw.syncRefusal(time.Now()); code != "" {
		t.Fatalf("acknowledged seq %d and still refusing %s", seq, code)
	}
}
