package group_test

import (
	"fmt"
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
	// Its members are in 2 groups (a-0, a-1): a 3rd group is refused
	// whichever of its credentials asks (TestLiveMembersCountPerTenant).
	mustLimit(t, join("b-0", "jti-a-3", "oauth:a"), "groups_per_credential")
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

// TestLiveMembersCountPerTenant: the other half of
// limits.groups_per_credential — the groups a tenant has live members in
// — counted per credential let an OAuth client's tokens each have
// members in that many groups (oauth.live_tokens_max times as many for
// the client). Three tokens of one client joining three existing groups:
// the third is refused naming the tenant, whichever token asks; a group
// the tenant already has members in still takes more; another tenant is
// not held back; the count survives a restore (the member keeps its
// tenant); once the tenant leaves a group, a place is free again.
func TestLiveMembersCountPerTenant(t *testing.T) {
	w := newWorld(t, func(c *group.Config) { c.Limits.GroupsPerCredential = 2 })
	w.topics(map[string]int32{"t": 1})
	w.pollUntilParked("gw1")
	for _, name := range []string{"g1", "g2"} { // existing groups, created by others
		w.joinAs(credA, group.Join{Group: name})
	}
	w.joinAs(credB, group.Join{Group: "g3"})
	token := func(n int) group.Credential {
		return group.Credential{ID: fmt.Sprint("jti-", n), Issuer: "capgate", Subject: "oauth:a"}
	}
	join := func(name string, n int) group.Message {
		t.Helper()
		return w.joinAs(token(n), group.Join{Group: name, Tenant: "oauth:a"})
	}
	granted := func(name string, n int) string {
		t.Helper()
		r, ok := join(name, n).(group.JoinReply)
		if !ok {
			t.Fatalf("token %d of client a joining %s: %#v", n, name, w.replies[w.ref])
		}
		return r.MemberID
	}
	first := granted("g1", 1)
	granted("g2", 2)
	refused := func(msg group.Message) {
		t.Helper()
		mustLimit(t, msg, "groups_per_credential")
		if r := msg.(group.Rejected); r.Details["tenant"] != "oauth:a" || r.Details["counted"] != nil {
			t.Fatalf("the live-members refusal's details %v", r.Details)
		}
	}
	refused(join("g3", 3))
	granted("g1", 3)
	if _, ok := w.joinAs(credB, group.Join{Group: "g1"}).(group.JoinReply); !ok {
		t.Fatalf("another tenant held back: %#v", w.replies[w.ref])
	}
	if err := w.m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}

	w.restart(0)
	refused(join("g3", 4))
	w.step(group.Leave{Ref: w.nextRef(), Group: "g1", MemberID: first})
	if _, ok := join("g3", 4).(group.JoinReply); ok {
		t.Fatal("the tenant still has a member in g1 (token 3's): g3 must stay refused")
	}
	for _, mem := range w.describe("g1").Members {
		if mem.Credential.Subject == "oauth:a" {
			w.step(group.Leave{Ref: w.nextRef(), Group: "g1", MemberID: mem.ID})
		}
	}
	granted("g3", 4)
	if err := w.m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
