package group_test

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

// The attack of redteam12 #2: one tenant's members each hold a heartbeat
// long poll — a connection each at the coordinator for up to
// heartbeat_wait, for one request per heartbeat_wait — and with enough of
// them take every max_connections slot from the other tenants. A tenant
// holds at most held_heartbeats_per_tenant: one more without news is
// answered at once, 429 rate_limited with retry_after_ms, and counts as
// contact (the member lives on); one with news is answered with it;
// another tenant's heartbeat is held; an answered hold gives its place
// back.
func TestHeldHeartbeatsBoundedPerTenant(t *testing.T) {
	w := newWorld(t, func(c *group.Config) { c.Limits.HeldHeartbeatsPerTenant = 2 })
	w.topics(map[string]int32{"t": 1})
	var a []string
	for range 3 {
		a = append(a, w.joinAs(credA, group.Join{Group: "g"}).(group.JoinReply).MemberID)
	}
	b := w.joinAs(credB, group.Join{Group: "g"}).(group.JoinReply).MemberID
	for _, id := range []string{a[0], a[1], b} { // news first (grants), then held
		for w.clients[id].parked == 0 {
			w.heartbeat(id)
		}
	}
	ref := w.sendHeartbeat(a[2], false)
	r, ok := w.replies[ref].(group.Rejected)
	if !ok || r.Code != api.CodeRateLimited || r.Details["limit"] != "coordinator.groups.limits.held_heartbeats_per_tenant" ||
		r.Details["max"] != int64(2) || r.Details["tenant"] != credA.ID {
		t.Fatalf("a third held heartbeat of one tenant: %#v, want 429 rate_limited naming the limit", w.replies[ref])
	}
	if ms, _ := r.Details["retry_after_ms"].(int64); ms <= 0 || time.Duration(ms)*time.Millisecond > w.cfg.HeartbeatWait {
		t.Fatalf("retry_after_ms %v, want within (0, heartbeat_wait]", r.Details["retry_after_ms"])
	}
	// Heard from: past its session timeout since joining, still a member.
	w.advance(w.cfg.SessionTimeout - time.Second)
	for _, id := range []string{a[0], a[1], b} {
		w.clients[id].parked = 0 // answered empty meanwhile; ask again
		w.heartbeat(id)
	}
	w.sendHeartbeat(a[2], false)
	w.advance(2 * time.Second)
	if !w.isMember("g", a[2]) {
		t.Fatal("a member whose heartbeats were answered at once timed out")
	}
	// An answered hold gives its place back.
	w.clients[a[0]].parked = 0
	ref = w.nextRef()
	w.step(group.Leave{Ref: ref, Group: "g", MemberID: a[0]})
	w.clients[a[2]].parked = 0
	if ref := w.sendHeartbeat(a[2], false); w.replies[ref] != nil { // held, or answered with the rebalance's news
		if _, refused := w.replies[ref].(group.Rejected); refused {
			t.Fatalf("a heartbeat refused after another of the tenant's left: %#v", w.replies[ref])
		}
	}
}
