package group_test

import (
	"testing"

	"github.com/capgate/capgate/coordinator/group"
)

// An OAuth client's credentials are many (one per token it obtained, up
// to oauth.live_tokens_max), but the groups its joins create count for
// one tenant (Join.Tenant): three tokens of one client create
// groups_per_credential groups between them, not three times as many; the
// refusal names the tenant and says what was counted. Another tenant
// still creates; describe names the creator; a delete frees the tenant's
// place, whichever of its credentials then creates.
func TestCreatedGroupsCountPerTenant(t *testing.T) {
	w := newWorld(t, creatorLimits)
	w.topics(map[string]int32{"t": 1})
	w.pollUntilParked("gw1")
	token := func(jti, tenant string) (group.Credential, string) {
		return group.Credential{ID: jti, Issuer: "capgate", Subject: tenant}, tenant
	}
	join := func(name, jti, tenant string) group.Message {
		t.Helper()
		cred, tenant := token(jti, tenant)
		return w.joinAs(cred, group.Join{Group: name, Tenant: tenant})
	}
	for i, name := range []string{"a-0", "a-1"} {
		if _, ok := join(name, "jti-"+name, "oauth:a").(group.JoinReply); !ok {
			t.Fatalf("token %d of client a creating %s: %#v", i, name, w.replies[w.ref])
		}
	}
	msg := join("a-2", "jti-a-2", "oauth:a")
	mustCreatedLimit(t, msg, 2)
	if d := msg.(group.Rejected).Details; d["tenant"] != "oauth:a" || d["counted"] != group.CountedGroupsCreated {
		t.Fatalf("the refusal's details %v name no tenant or count", d)
	}
	if _, ok := join("b-0", "jti-b-0", "oauth:b").(group.JoinReply); !ok {
		t.Fatalf("another tenant refused a new group: %#v", w.replies[w.ref])
	}
	if _, ok := join("b-0", "jti-a-3", "oauth:a").(group.JoinReply); !ok {
		t.Fatalf("client a refused a group it does not create: %#v", w.replies[w.ref])
	}
	if a, jti := w.m.GroupsCreated("oauth:a"), w.m.GroupsCreated("jti-a-0"); a != 2 || jti != 0 {
		t.Fatalf("places: tenant oauth:a %d, its first credential %d; want 2, 0", a, jti)
	}
	if d, _ := w.m.DescribeGroup("a-1"); d.Creator != "oauth:a" {
		t.Fatalf("a-1's creator %q, want oauth:a", d.Creator)
	}

	w.step(group.DeleteGroup{Ref: w.nextRef(), Group: "a-0", Force: true})
	if _, ok := w.replies[w.ref].(group.DeleteGroupReply); !ok {
		t.Fatalf("delete: %#v", w.replies[w.ref])
	}
	if _, ok := join("a-2", "jti-a-4", "oauth:a").(group.JoinReply); !ok {
		t.Fatalf("a fresh token of client a refused after a delete freed a place: %#v", w.replies[w.ref])
	}
	mustCreatedLimit(t, join("a-3", "jti-a-5", "oauth:a"), 2)

	// Without a tenant a join counts for its credential id, as before.
	if _, ok := w.joinAs(credA, group.Join{Group: "c-0"}).(group.JoinReply); !ok || w.m.GroupsCreated(credA.ID) != 1 {
		t.Fatalf("a join without a tenant: %#v, %d places for its credential", w.replies[w.ref], w.m.GroupsCreated(credA.ID))
	}
}
