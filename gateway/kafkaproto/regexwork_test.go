package kafkaproto

import (
	"fmt"
	"testing"
	"time"
)

// TestRegexWorkIsPaidPerTenant: a tenant's regex match that ran is paid
// after, at regexStepsPerSecond; until then its next match does not run,
// while another tenant's does and a regex already matched against the
// same topic list is answered from its last match. The tenants owing
// steps are bounded: full, a new one waits, and the paid-up ones make
// room. Without the debt every heartbeat of every connection ran a
// match of up to DefaultMaxSteps (redteam18).
func TestRegexWorkIsPaidPerTenant(t *testing.T) {
	var w regexWork
	t0 := time.Unix(1_000_000, 0)
	if !w.mayRun("a", t0) {
		t.Fatal("a tenant owing nothing may not match")
	}
	w.ran("a", "(.?){60}x", regexMatch{gen: 7, over: true}, 2*regexStepsPerSecond, t0)
	if w.mayRun("a", t0.Add(time.Second)) {
		t.Error("a tenant owing a second's steps matched again at once")
	}
	if !w.mayRun("a", t0.Add(2*time.Second+time.Millisecond)) {
		t.Error("a tenant that paid its steps may not match")
	}
	if !w.mayRun("b", t0) {
		t.Error("another tenant waited for a's debt")
	}
	if m, ok := w.cached("(.?){60}x", 7); !ok || !m.over {
		t.Errorf("the last match against gen 7: %+v %v", m, ok)
	}
	if _, ok := w.cached("(.?){60}x", 8); ok {
		t.Error("a match against an older topic list answered for a newer")
	}
	for i := range regexTenantsMax - 1 {
		w.ran(fmt.Sprint("t", i), fmt.Sprint("r", i), regexMatch{gen: 7}, regexStepsPerSecond, t0)
	}
	if w.mayRun("new", t0) {
		t.Errorf("a new tenant matched with %d tenants owing steps", regexTenantsMax)
	}
	if !w.mayRun("new", t0.Add(3*time.Second)) || len(w.owed) != 0 {
		t.Errorf("after every tenant paid: %d still owe, a new tenant refused", len(w.owed))
	}
	if len(w.cache) > regexCacheMax {
		t.Errorf("%d regexes kept, at most %d", len(w.cache), regexCacheMax)
	}
}
