package coordinator_test

import (
	"net/http"
	"testing"

	"github.com/capgate/capgate/api"
)

// TestRenewalOfAReboundMemberIsPricedAsItsTenants (review24): a renewal
// mints a capability again for every partition its member owns, and is
// priced so in the member's tenant's tenant_member_rate (admitRenewal) —
// when the bearer's tenant is the member's. An admin-minted credential
// is its own tenant (its jti), and a renewal with renew_credential
// rebinds the member to the new credential while it keeps its old
// tenant: from then on every renewal's bearer (the bound credential) was
// "another tenant's", priced one token of the new credential's own
// bucket, and the machine took it and minted every partition again — a
// renewal of a member of 10,000 partitions for one token, join_burst of
// them at once (redteam14 #9's amplification back). The renewal proves
// it is the member's (its renew_token is the member's own token), so it
// is priced in the member's tenant. Here the tenant can pay the join and
// one renewal of its 200 partitions, not two: the second is 429.
func TestRenewalOfAReboundMemberIsPricedAsItsTenants(t *testing.T) {
	e := newEnv(t, map[string]int32{"big": 200})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.001, 411 // a token every 1,000 s: the join's 200 mints, one renewal's 201, 10 left
	h := e.start(t)
	bound := h.clientCredential(t, []string{"g"}, []string{"big"})
	renewed := h.clientCredential(t, []string{"g"}, []string{"big"}) // the same name: the credential renewed
	join := api.JoinRequest{Topics: []string{"big"}, SessionTimeoutMs: 300_000}
	m := h.join(t, "g", bound, join)
	if len(m.grants) != 200 {
		t.Fatalf("the member was granted %d partitions, want 200", len(m.grants))
	}
	renew := join
	renew.MemberID, renew.RenewToken, renew.RenewCredential = m.id, m.token, bound
	var first api.JoinResponse
	h.call(t, "POST", "/v1/groups/g/join", renewed, renew, http.StatusOK, &first) // rebinds the member to renewed
	e.remember(first.MemberToken)
	if first.MemberID != m.id || len(first.Grants) != 200 {
		t.Fatalf("the renewal with renew_credential answered member %q with %d grants, want %q with 200", first.MemberID, len(first.Grants), m.id)
	}
	renew.RenewToken, renew.RenewCredential = first.MemberToken, ""
	status, body, _, err := h.try("POST", "/v1/groups/g/join", renewed, renew)
	if err != nil || status != http.StatusTooManyRequests || limitOf(body) != "coordinator.tenant_member_rate" {
		t.Fatalf("a second renewal of the member's 200 partitions with 10 of its tenant's tokens left: %v %d %.300s, "+
			"want 429 naming coordinator.tenant_member_rate", err, status, body)
	}
}

// TestRejoinOfAReboundMemberIsPricedAsItsTenants (review24): as a
// renewal, a rejoin with the credential a member is bound to (member_id,
// no renew_token) fences every partition the member owns and is priced
// in the member's tenant — but a member rebound by renew_credential keeps
// its old tenant, and its bound credential's rejoins were "another
// tenant's member", one token of the credential's own bucket, while the
// machine took them and fenced all 200 partitions. The tenant can pay
// the join, the renewal and nothing more: the rejoin is 429.
func TestRejoinOfAReboundMemberIsPricedAsItsTenants(t *testing.T) {
	e := newEnv(t, map[string]int32{"big": 200})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.001, 411 // the join's 200 mints, the renewal's 201, 10 left
	h := e.start(t)
	bound := h.clientCredential(t, []string{"g"}, []string{"big"})
	renewed := h.clientCredential(t, []string{"g"}, []string{"big"})
	join := api.JoinRequest{Topics: []string{"big"}, SessionTimeoutMs: 300_000}
	m := h.join(t, "g", bound, join)
	renew := join
	renew.MemberID, renew.RenewToken, renew.RenewCredential = m.id, m.token, bound
	var first api.JoinResponse
	h.call(t, "POST", "/v1/groups/g/join", renewed, renew, http.StatusOK, &first) // rebinds the member to renewed
	e.remember(first.MemberToken)
	rejoin := join
	rejoin.MemberID = m.id
	status, body, _, err := h.try("POST", "/v1/groups/g/join", renewed, rejoin)
	if err != nil || status != http.StatusTooManyRequests || limitOf(body) != "coordinator.tenant_member_rate" {
		t.Fatalf("a rejoin fencing the member's 200 partitions with 10 of its tenant's tokens left: %v %d %.300s, "+
			"want 429 naming coordinator.tenant_member_rate", err, status, body)
	}
}

// TestRenewalOfAReboundMemberVouchesForItsTenant: a join's answer vouches
// at the client's address for the holder of the capabilities it mints —
// their tnt, the member's tenant — so that holder's capabilities are
// checked there while a neighbour keeps the address's budget spent
// (vouch, redteam8). A renewal's capabilities carry the member's tenant,
// but the answer vouched for the bearer's: after a renew_credential
// rebind (the member keeps its old tenant) the address learned a holder
// nothing it was handed carries, and not the one that is. The renewal
// adds no known holder: the member's tenant, its credential's holder and
// its member were known from the join.
func TestRenewalOfAReboundMemberVouchesForItsTenant(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	h := e.start(t)
	nat := h.fromAddr("127.0.0.2")
	bound := h.clientCredential(t, []string{"g"}, []string{"orders"})
	renewed := h.clientCredential(t, []string{"g"}, []string{"orders"}) // the same name: the credential renewed
	join := api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000}
	m := nat.join(t, "g", bound, join)
	known := h.metric(t, "capgate_coordinator_auth_known_holders")
	renew := join
	renew.MemberID, renew.RenewToken, renew.RenewCredential = m.id, m.token, bound
	var first api.JoinResponse
	nat.call(t, "POST", "/v1/groups/g/join", renewed, renew, http.StatusOK, &first) // rebinds the member to renewed
	e.remember(first.MemberToken)
	for _, g := range first.Grants {
		if tnt := claimsOf(t, g.Capability)["tnt"]; tnt != claimsOf(t, bound)["jti"] {
			t.Fatalf("the renewal's capability of %s/%d carries tnt %v, want the member's tenant %v", g.Topic, g.Partition, tnt, claimsOf(t, bound)["jti"])
		}
	}
	if n := h.metric(t, "capgate_coordinator_auth_known_holders"); n != known {
		t.Fatalf("known holders %v after the renewal, want %v: it vouched for a holder its capabilities do not carry", n, known)
	}
}
