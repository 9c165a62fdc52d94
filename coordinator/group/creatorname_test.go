package group_test

import (
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/group"
)

// newuser3 #11: describe named a group's creator ("svc-a (jti-a)") only
// while a member of the creating credential was live, the name coming
// from that member; once the group was empty it showed the id alone. The
// group keeps the creating credential's name beside the id: after its
// members left, after a restart (GroupRecord.CreatorName), and not when
// the name only repeats the id (an OAuth client's tenant) or is longer
// than creatorNameMax (255 bytes, counted in the group's state estimate).
func TestGroupKeepsItsCreatorsName(t *testing.T) {
	w := newWorld(t, creatorLimits)
	w.topics(map[string]int32{"t": 1})
	w.pollUntilParked("gw1")
	w.commitAndLeave(credA, "a-0")
	d, ok := w.m.DescribeGroup("a-0")
	if !ok || len(d.Members) != 0 || d.Creator != "jti-a" || d.CreatorName != "svc-a" {
		t.Fatalf("empty group a-0: creator %q name %q, %d members", d.Creator, d.CreatorName, len(d.Members))
	}

	oauth := group.Credential{ID: "tok-1", Issuer: "capgate", Subject: "oauth:billing"}
	if _, ok := w.joinAs(oauth, group.Join{Group: "o-0", Tenant: "oauth:billing"}).(group.JoinReply); !ok {
		t.Fatalf("oauth join: %#v", w.replies[w.ref])
	}
	long := group.Credential{ID: "idp-1", Issuer: "https://idp", Subject: strings.Repeat("s", 256)}
	if _, ok := w.joinAs(long, group.Join{Group: "l-0"}).(group.JoinReply); !ok {
		t.Fatalf("long-subject join: %#v", w.replies[w.ref])
	}
	for name, want := range map[string][2]string{"o-0": {"oauth:billing", ""}, "l-0": {"idp-1", ""}} {
		if d, _ := w.m.DescribeGroup(name); d.Creator != want[0] || d.CreatorName != want[1] {
			t.Fatalf("%s: creator %q name %q, want %q %q", name, d.Creator, d.CreatorName, want[0], want[1])
		}
	}

	w.restart(time.Second)
	if d, ok := w.m.DescribeGroup("a-0"); !ok || d.CreatorName != "svc-a" {
		t.Fatalf("after a restart a-0's creator name is %q", d.CreatorName)
	}
}
