package group_test

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

// An offset reset of a partition leased to an outside holder (newuser3
// #6): it ended the lease silently — the holder, no member, is never
// granted again — although the reset's help promised a held partition is
// "granted again from the new offset". Without Force it is refused 409
// naming the holder and until, and changes nothing; with Force it ends the
// lease and says so in its reply.
func TestResetOffsetOfAnOutsideLease(t *testing.T) {
	w, a := oneMember(t, longSessions)
	ref := w.nextRef()
	w.step(group.Lease{Ref: ref, Group: "g", Topic: "t", Partition: 1, Holder: "backfill-job", TTL: time.Hour})
	w.pollUntilParked("gw1")
	w.release(a, 77)
	lease := mustReply[group.LeaseReply](t, w, ref)
	before := w.partition("g", "t", 1)

	ref = w.nextRef()
	w.step(group.ResetOffset{Ref: ref, Group: "g", Topic: "t", Partition: 1, Offset: 5})
	mustReject(t, w, ref, api.CodeConflict)
	r := w.replies[ref].(group.Rejected)
	details, _ := r.Details["lease"].(map[string]any)
	if details["holder"] != "backfill-job" || details["until"] != lease.Until.UTC().Format("2006-01-02T15:04:05.000Z07:00") {
		t.Fatalf("refusal's lease details: %+v (%s)", r.Details, r.Message)
	}
	after := w.partition("g", "t", 1)
	if after.Committed != before.Committed || after.Epoch != before.Epoch || after.Owner != "backfill-job" || after.LeaseHolder != "backfill-job" {
		t.Fatalf("a refused reset changed the partition: %+v → %+v", before, after)
	}

	ref = w.nextRef()
	w.step(group.ResetOffset{Ref: ref, Group: "g", Topic: "t", Partition: 1, Offset: 5, Force: true})
	done := mustReply[group.ResetOffsetReply](t, w, ref)
	if l := done.LeaseEnded; l == nil || l.Holder != "backfill-job" || !l.Until.Equal(lease.Until) {
		t.Fatalf("forced reset's reply: %+v", done.LeaseEnded)
	}
	if p := w.partition("g", "t", 1); p.Committed != 5 || p.LeaseHolder != "" || p.Epoch <= before.Epoch {
		t.Fatalf("after the forced reset: %+v", p)
	}
}
