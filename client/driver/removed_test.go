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
// rejoined without a word the shell could log.
func TestMemberRemovedIsReported(t *testing.T) {
	for _, c := range []struct {
		name            string
		failFirst, stop bool
		want, unheard   bool
	}{
		{"revoked", false, false, true, false},
		{"expired while unheard", true, false, true, true},
		{"own leave", false, true, false, false},
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
			cmds = d.Answer(driver.Answered{Now: t0, Call: beat.Call, Failure: refused(api.CodeUnknownMember, 409)})
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
