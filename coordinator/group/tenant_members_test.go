package group_test

import (
	"testing"

	"github.com/capgate/capgate/coordinator/group"
)

// The attack of redteam4 #2: one tenant held members_per_group ×
// groups_per_credential live members, far more than state_bytes holds, and
// every other tenant's join was refused. Its live members in all groups
// are bounded by members_per_credential: the next join is 409
// limit_exceeded naming the setting and the tenant, another tenant joins,
// a static replacement of its own member is not a new member, and a leave
// gives a place back.
func TestMembersPerCredentialBoundsATenant(t *testing.T) {
	w := newWorld(t, func(c *group.Config) {
		c.Limits.MembersPerCredential = 3
		c.Limits.MembersPerGroup = 100
		c.Limits.GroupsPerCredential = 100
	})
	w.topics(map[string]int32{"t": 2})
	var ids []string
	for _, j := range []group.Join{{Group: "g", InstanceID: "s"}, {Group: "g"}, {Group: "h"}} {
		r, ok := w.joinAs(credA, j).(group.JoinReply)
		if !ok {
			t.Fatalf("join %+v under the limit: %#v", j, w.replies[w.ref])
		}
		ids = append(ids, r.MemberID)
	}
	for _, name := range []string{"g", "h", "new"} {
		msg := w.joinAs(credA, group.Join{Group: name})
		mustLimit(t, msg, "members_per_credential")
		if r := msg.(group.Rejected); r.Details["tenant"] != credA.ID || r.Details["max"] != int64(3) {
			t.Fatalf("the refusal does not name the tenant and the limit: %#v", r)
		}
	}
	if _, ok := w.joinAs(credB, group.Join{Group: "g"}).(group.JoinReply); !ok {
		t.Fatalf("another tenant's join refused: %#v", w.replies[w.ref])
	}
	if _, ok := w.joinAs(credA, group.Join{Group: "g", InstanceID: "s"}).(group.JoinReply); !ok {
		t.Fatalf("a static replacement of the tenant's own member at its limit: %#v", w.replies[w.ref])
	}
	ref := w.nextRef()
	w.step(group.Leave{Ref: ref, Group: "h", MemberID: ids[2]})
	if _, ok := w.joinAs(credA, group.Join{Group: "new"}).(group.JoinReply); !ok {
		t.Fatalf("join after a leave freed a place: %#v", w.replies[w.ref])
	}
	mustLimit(t, w.joinAs(credA, group.Join{Group: "h"}), "members_per_credential")
}
