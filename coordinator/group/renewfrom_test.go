package group_test

import (
	"testing"

	"github.com/capgate/capgate/coordinator/group"
)

// TestRenewFromKeepsTheMembersTenant (review24): a renewal with
// renew_credential (Join.RenewFrom) rebinds a member bound to an
// admin-minted credential to another of the same name, and the member
// must stay its old tenant's — every per-tenant count (its groups, its
// charged bytes, the index the shell prices it by) holds it there. An
// admin-minted credential is its own tenant (Credential.Tenant empty:
// its ID), and the rebind copied that empty Tenant onto the new
// credential: the member silently became the new credential's tenant,
// its counts left under the old one (CheckInvariants: the tenant index,
// the tenant's groups), and its leave uncounted from a tenant that never
// counted it.
func TestRenewFromKeepsTheMembersTenant(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 2})
	old := group.Credential{ID: "jti-old", Issuer: "capgate", Subject: "svc"}
	renewed := group.Credential{ID: "jti-new", Issuer: "capgate", Subject: "svc"}
	joined, ok := w.joinAs(old, group.Join{Group: "g", Tenant: old.ID}).(group.JoinReply)
	if !ok {
		t.Fatal("the join was refused")
	}
	reply, ok := w.joinAs(renewed, group.Join{Group: "g", Tenant: renewed.ID, MemberID: joined.MemberID, Renew: true, RenewFrom: old.ID}).(group.JoinReply)
	if !ok || reply.MemberID != joined.MemberID {
		t.Fatalf("the renewal with renew_credential: %#v, want member %q renewed", reply, joined.MemberID)
	}
	if tenant, _ := w.m.MemberTenants().Tenant("g", joined.MemberID); tenant != old.ID {
		t.Fatalf("the renewed member's tenant is %q, want its old %q", tenant, old.ID)
	}
	w.step(group.Leave{Ref: w.nextRef(), Group: "g", MemberID: joined.MemberID}) // CheckInvariants after every step
}
