package session

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// A member token never outlives the credential it was joined with, so
// the shell renews the member before it expires (RenewRequested). The
// renewal must hand every partition over as a revoke does — hook, the
// user's acknowledgement of what was delivered, a release committing
// the processed offset with the old capability — and only then leave
// and rejoin; the rejoin's grants start where the release committed, so
// nothing is lost or delivered twice. Grants arriving meanwhile are not
// taken.
func TestRenewReleasesEverythingThenRejoins(t *testing.T) {
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute))))
	next := one[Fetch](t, h.complete(f, 3))
	h.poll() // offsets 0..2 delivered, not yet processed

	acts := h.step(RenewRequested{Now: h.now})
	hook := one[CallRevoke](t, acts)
	if hook.Lost || len(hook.Partitions) != 1 || hook.Partitions[0] != pA {
		t.Fatalf("renewal revoke %+v, want pA revoked (not lost)", hook)
	}
	none[Leave](t, h.news(api.HeartbeatResponse{Grants: []api.Grant{grant(pB, 1, 0, "capB", t0.Add(time.Minute))}}))
	if _, held := h.s.Inspect(pB); held {
		t.Fatal("a grant during the renewal was taken")
	}
	h.step(FetchDone{Now: h.now, ID: next.ID, Partition: pA, Canceled: true})
	none[Commit](t, h.step(HookDone{Now: h.now, ID: hook.ID}))
	c := one[Commit](t, h.step(Polled{Now: h.now})) // the user processed 0..2
	if !c.Release || len(c.Offsets) != 1 || c.Offsets[0].Offset != 3 || c.Offsets[0].Capability != "capA" {
		t.Fatalf("release %+v, want pA at 3 with the old capability", c)
	}
	leave := one[Leave](t, h.step(CommitDone{Now: h.now, ID: c.ID}))
	if !leave.Renew || leave.Token != "member-token" {
		t.Fatalf("leave %+v, want the renewal's with the old member token", leave)
	}
	acts = h.step(LeaveDone{Now: h.now})
	one[Rejoin](t, acts)
	none[Stop](t, acts)
	incarnation := h.s.Member().Incarnation
	f = one[Fetch](t, h.join(grant(pA, 2, 3, "capA2", t0.Add(time.Minute))))
	if f.Offset != 3 || h.s.Status() != Active || h.s.Member().Incarnation != incarnation+1 {
		t.Fatalf("after the rejoin: fetch at %d, status %s, incarnation %d", f.Offset, h.s.Status(), h.s.Member().Incarnation)
	}
}

// A Close while a renewal releases ends the consumer instead: the leave
// stops the session, no rejoin.
func TestCloseDuringRenewalStops(t *testing.T) {
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute))))
	hook := one[CallRevoke](t, h.step(RenewRequested{Now: h.now}))
	h.step(FetchDone{Now: h.now, ID: f.ID, Partition: pA, Canceled: true})
	none[Stop](t, h.step(CloseRequested{Now: h.now}))
	c := one[Commit](t, h.step(HookDone{Now: h.now, ID: hook.ID}))
	leave := one[Leave](t, h.step(CommitDone{Now: h.now, ID: c.ID}))
	if leave.Renew {
		t.Fatal("the leave after a Close still renews")
	}
	acts := h.step(LeaveDone{Now: h.now})
	one[Stop](t, acts)
	none[Rejoin](t, acts)
}

// An expired member token (the credential behind it lapsed) is answered
// token_expired on every heartbeat: the member is lost and rejoined
// rather than heartbeating in vain for ever.
func TestExpiredMemberTokenRejoins(t *testing.T) {
	h := newHarness(t)
	one[Fetch](t, h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute))))
	acts := h.step(HeartbeatFailed{Now: h.now, Incarnation: h.s.Member().Incarnation, Code: api.CodeTokenExpired})
	if !one[CallRevoke](t, acts).Lost {
		t.Fatal("partitions of an expired member not reported lost")
	}
	one[Rejoin](t, acts)
}
