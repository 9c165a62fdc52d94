package driver_test

import (
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/driver"
	"github.com/capgate/capgate/client/session"
)

// TestMemberRemovedIsReported: a heartbeat of the active member answered
// unknown_member (an administrator removed it) gives the shell
// MemberRemoved to tell the user, next to the rejoin; after the same
// heartbeat failed without an answer it is Unheard (the session expired
// while the coordinator did not hear it); the unknown_member answering
// the member's own leave (closing) reports nothing. Before, the driver
// rejoined without a word the shell could log. An answer saying the
// member was revoked (api.DetailRemoved) is never Unheard: under CI load
// a heartbeat attempt had failed before an administrator's revoke-member,
// and consume called the revoke an expiry.
func TestMemberRemovedIsReported(t *testing.T) {
	for _, c := range []struct {
		name            string
		failFirst, stop bool
		removed         string
		want, unheard   bool
	}{
		{"revoked", false, false, "", true, false},
		{"expired while unheard", true, false, "", true, true},
		{"revoked after an unanswered attempt", true, false, api.RemovedRevoked, true, false},
		{"own leave", false, true, "", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, cmds := joined(t, config(), 0)
			beat := ofKind(t, cmds, driver.KindHeartbeat)
			if c.failFirst {
				d.Answer(driver.Answered{Now: t0, Call: beat.Call, Failure: noAnswer})
				beat = only(t, d.Tick(d.NextDeadline()), driver.KindHeartbeat)
			}
			if c.stop {
				d.User(session.CloseRequested{Now: t0})
			}
			f := refused(api.CodeUnknownMember, 409)
			f.Removed = c.removed
			cmds = d.Answer(driver.Answered{Now: t0, Call: beat.Call, Failure: f})
			r, ok := find[driver.MemberRemoved](cmds)
			if ok != c.want || r.Unheard != c.unheard || (ok && (r.Member != "m1" || r.Err == nil)) {
				t.Fatalf("after unknown_member: %+v (MemberRemoved %t %+v), want it %t, unheard %t", cmds, ok, r, c.want, c.unheard)
			}
			if c.want && sends(cmds) == nil {
				t.Fatalf("after unknown_member: %+v, want a join again", cmds)
			}
		})
	}
}

// TestMemberRemovedIsReportedByACommit: a commit of the active member
// answered unknown_member before the heartbeat is (an administrator's
// revoke-member met consume's periodic commit first) reports
// MemberRemoved, once: the heartbeat's own unknown_member after it finds
// the session rejoining. Before, the commit made the session rejoin and
// the heartbeat's answer was dropped as not active's, so nothing told the
// user (TestConsumeSaysWhenAnAdministratorRevokedIt failed in CI).
func TestMemberRemovedIsReportedByACommit(t *testing.T) {
	d, cmds := joined(t, config(), 1)
	beat := ofKind(t, cmds, driver.KindHeartbeat)
	fetch := ofKind(t, cmds, driver.KindFetch)
	d.Answer(driver.Answered{Now: t0, Call: fetch.Call, Fetched: driver.Fetched{Records: 3, Bytes: 30, Next: 3}})
	d.User(session.Polled{Now: t0})
	commit := ofKind(t, d.User(session.CommitRequested{Now: t0, Ticket: 1}), driver.KindCommit)
	cmds = d.Answer(driver.Answered{Now: t0, Call: commit.Call, Failure: refused(api.CodeUnknownMember, 409)})
	r, ok := find[driver.MemberRemoved](cmds)
	if !ok || r.Unheard || r.Member != "m1" || r.Err == nil {
		t.Fatalf("after the commit's unknown_member: %+v (MemberRemoved %t %+v), want it reported, not unheard", cmds, ok, r)
	}
	if sends(cmds) == nil {
		t.Fatalf("after the commit's unknown_member: %+v, want a join again", cmds)
	}
	cmds = d.Answer(driver.Answered{Now: t0, Call: beat.Call, Failure: refused(api.CodeUnknownMember, 409)})
	if r, again := find[driver.MemberRemoved](cmds); again {
		t.Fatalf("the heartbeat's unknown_member reported the removal again: %+v", r)
	}
}
