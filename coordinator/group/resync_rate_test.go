package group_test

import (
	"testing"

	"github.com/capgate/capgate/coordinator/group"
)

// TestResyncHonouredAtMostEverySecond is the attack: a member saying
// resync on every heartbeat made the machine render its whole assignment
// again on each, answered at once — a loop of them made the coordinator
// sign capabilities as fast as one tenant could ask. A resync within
// group.ResyncEvery of the last one honoured renders nothing and the
// heartbeat is held as any other; the resync is due, not dropped, and the
// member's first heartbeat after the window carries everything it owns,
// resync said or not.
func TestResyncHonouredAtMostEverySecond(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 4})
	w.pollUntilParked("gw")
	a := w.join("g", "a", "t")
	w.settle("g")
	c := w.clients[a]
	if len(c.held) != 4 {
		t.Fatalf("a holds %d partitions, want 4", len(c.held))
	}
	renewals := func(from int) int {
		n := 0
		for _, news := range c.news[from:] {
			n += len(news.Renew) + len(news.Grants)
		}
		return n
	}
	// a's own held heartbeat is answered when it is superseded: drain it.
	answerHeld := func() {
		if c.parked != 0 {
			w.advance(w.cfg.HeartbeatWait)
		}
	}
	answerHeld()
	before := len(c.news)
	if ref := w.sendHeartbeat(a, true); ref == 0 || c.parked == ref {
		t.Fatalf("the first resync was held: it must be answered at once")
	}
	if got := renewals(before); got != 4 {
		t.Fatalf("the first resync carried %d capabilities, want 4", got)
	}
	loop := len(c.news)
	for i := range 50 { // the loop: at the same instant, resync again and again
		ref := w.sendHeartbeat(a, true)
		if ref == 0 {
			t.Fatalf("resync %d: a heartbeat was still held", i)
		}
		if c.parked != ref {
			t.Fatalf("resync %d within %v of the last was answered at once: it must be held", i, group.ResyncEvery)
		}
		c.parked = 0 // the attacker does not wait: it asks again
	}
	if got := renewals(loop); got != 0 {
		t.Fatalf("50 resyncs within %v rendered %d capabilities, want none", group.ResyncEvery, got)
	}
	w.advance(group.ResyncEvery)
	from := len(c.news)
	w.heartbeat(a) // no resync said: the one due is honoured
	if got := renewals(from); got != 4 {
		t.Fatalf("the heartbeat after the window carried %d capabilities, want the 4 of the resync due", got)
	}
}
