package coordinator_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestRenewKeepsTheMemberInPlace: a join with renew_token (the member's
// own member token beside its credential) renews the member in place —
// the SDK's credential renewal. Its id, partitions and epochs stay (no
// fence: the heartbeat after it revokes nothing), the answer renews the
// capabilities it holds under their epochs, and the new member token
// outlives the old. A plain rejoin fences instead: its regrant at the
// last commit re-delivered whatever the member read since, and a leave
// and join (the SDK's renewal before) moved the member's partitions to
// the others and back.
func TestRenewKeepsTheMemberInPlace(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	e.cfg.MemberTokenTTL = time.Minute // the credential lives an hour: the token is member_token_ttl's
	now, advance := testClock()
	h := e.start(t, coordinator.WithClock(now))
	cred := h.clientCredential(t, []string{"g"}, []string{"orders"})
	join := api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000}
	m := h.join(t, "g", cred, join)
	before := map[int32]uint64{}
	for p := range int32(2) {
		g, ok := m.grant("orders", p)
		if !ok {
			t.Fatalf("partition %d not granted at the join", p)
		}
		before[p] = g.Epoch
	}
	oldExp := claimsOf(t, m.token)["exp"].(float64)

	advance(3 * time.Second)
	renew := join
	renew.MemberID, renew.RenewToken = m.id, m.token
	var resp api.JoinResponse
	h.call(t, "POST", "/v1/groups/g/join", cred, renew, http.StatusOK, &resp)
	e.remember(resp.MemberToken)
	if resp.MemberID != m.id {
		t.Fatalf("renewal answered member %q, want %q", resp.MemberID, m.id)
	}
	if exp := claimsOf(t, resp.MemberToken)["exp"].(float64); exp <= oldExp {
		t.Fatalf("renewed member token expires at %v, the old one at %v: not renewed", exp, oldExp)
	}
	if len(resp.Grants) != 2 {
		t.Fatalf("renewal answered %d grants, want the member's 2 capabilities renewed", len(resp.Grants))
	}
	for _, g := range resp.Grants {
		e.remember(g.Capability)
		if g.Epoch != before[g.Partition] {
			t.Errorf("partition %d: epoch %d after the renewal, %d before: fenced", g.Partition, g.Epoch, before[g.Partition])
		}
	}
	d := h.describe(t, "g")
	if len(d.Members) != 1 || d.Members[0].ID != m.id {
		t.Fatalf("members after the renewal %+v, want %s alone", d.Members, m.id)
	}
	for _, p := range d.Partitions {
		if p.Owner != m.id || p.Epoch != before[p.Partition] || p.RevokeStarted != "" {
			t.Errorf("partition %d after the renewal: %+v, want owned by %s at epoch %d, nothing revoked", p.Partition, p, m.id, before[p.Partition])
		}
	}
}

// TestRenewTokenIsChecked is the attacks on renew_token: it renews only
// the member whose member token it is, for the credential that member is
// bound to, with the member's subscription. Another member's token, a
// credential the member is not bound to (holding a member token does not
// rebind it), a member token as bearer, an expired or forged token, a
// revoked member's, a missing member_id and a changed subscription are
// each refused with nothing renewed.
func TestRenewTokenIsChecked(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2, "other": 1})
	now, advance := testClock()
	h := e.start(t, coordinator.WithClock(now))
	cred := h.clientCredential(t, []string{"g", "h"}, []string{"orders", "other"})
	stranger := h.clientCredential(t, []string{"g"}, []string{"orders"})
	join := api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000}
	a := h.join(t, "g", cred, join)
	b := h.join(t, "g", cred, join)
	elsewhere := h.join(t, "h", cred, join)
	renewOf := func(memberID, token string) api.JoinRequest {
		r := join
		r.MemberID, r.RenewToken = memberID, token
		return r
	}
	const path = "/v1/groups/g/join"
	h.expectError(t, "POST", path, cred, renewOf(a.id, b.token), http.StatusForbidden, api.CodeForbidden)
	h.expectError(t, "POST", path, cred, renewOf(a.id, elsewhere.token), http.StatusForbidden, api.CodeForbidden)
	h.expectError(t, "POST", path, stranger, renewOf(a.id, a.token), http.StatusConflict, api.CodeUnknownMember)
	h.expectError(t, "POST", path, a.token, renewOf(a.id, a.token), http.StatusBadRequest, api.CodeBadRequest)
	h.expectError(t, "POST", path, cred, renewOf("", a.token), http.StatusBadRequest, api.CodeBadRequest)
	h.expectError(t, "POST", path, cred, renewOf(a.id, "not.a.token"), http.StatusUnauthorized, api.CodeUnauthorized)
	h.expectError(t, "POST", path, cred, renewOf(a.id, cred), http.StatusUnauthorized, api.CodeUnauthorized)
	changed := renewOf(a.id, a.token)
	changed.Topics = []string{"orders", "other"}
	h.expectError(t, "POST", path, cred, changed, http.StatusBadRequest, api.CodeBadRequest)

	var out coordinator.MemberRevokeResponse
	h.call(t, "POST", "/v1/admin/groups/g/members/"+b.id+"/revoke", e.adminToken, nil, http.StatusOK, &out)
	h.expectError(t, "POST", path, cred, renewOf(b.id, b.token), http.StatusConflict, api.CodeUnknownMember)

	exp := claimsOf(t, a.token)["exp"].(float64)
	advance(time.Unix(int64(exp), 0).Sub(now()) + time.Second)
	h.expectError(t, "POST", path, cred, renewOf(a.id, a.token), http.StatusUnauthorized, api.CodeTokenExpired)
}

// TestRenewRebindsAnOAuthClientsMember: each /oauth/token credential has
// its own jti, so a member joined with one could not be renewed with the
// next (the rejoin is bound to the credential) and left and joined anew.
// A renewal with another token of the same OAuth client rebinds the
// member to it: denying the old token no longer ends the member, denying
// the new one does. An admin-minted credential is its own tenant, so
// another one — of the same name — cannot renew a member of it (holding
// the member token does not change whom the member belongs to), nor can
// another OAuth client's token.
func TestRenewRebindsAnOAuthClientsMember(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	h := e.start(t)
	token := func(c coordinator.OAuthClientCreated) string { return oauthToken(t, e, h, c) }
	billing := createOAuthClient(t, h, "billing", []string{"g"})
	other := createOAuthClient(t, h, "other", []string{"g"})
	first, second := token(billing), token(billing)
	join := api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000}
	m := h.join(t, "g", first, join)
	renew := join
	renew.MemberID, renew.RenewToken = m.id, m.token

	h.expectError(t, "POST", "/v1/groups/g/join", token(other), renew, http.StatusConflict, api.CodeUnknownMember)
	var resp api.JoinResponse
	h.call(t, "POST", "/v1/groups/g/join", second, renew, http.StatusOK, &resp)
	e.remember(resp.MemberToken)
	if resp.MemberID != m.id {
		t.Fatalf("renewal answered member %q, want %q", resp.MemberID, m.id)
	}
	checkRebound(t, e, h, first, second, "")

	admin := h.clientCredential(t, []string{"g"}, []string{"orders"})
	sameName := h.clientCredential(t, []string{"g"}, []string{"orders"})
	a := h.join(t, "g", admin, join)
	renew.MemberID, renew.RenewToken = a.id, a.token
	h.expectError(t, "POST", "/v1/groups/g/join", sameName, renew, http.StatusConflict, api.CodeUnknownMember)
}

// TestRenewRebindSurvivesARestart: a renewal's rebind is persisted with
// the member (store.Member's credential), so a restarted coordinator —
// or a standby restoring the log — still has the member bound to the
// credential it was renewed onto: a plain rejoin with the old token is
// unknown_member, denying the old one leaves the member, denying the new
// one ends it.
func TestRenewRebindSurvivesARestart(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	h := e.start(t)
	billing := createOAuthClient(t, h, "billing", []string{"g"})
	first, second := oauthToken(t, e, h, billing), oauthToken(t, e, h, billing)
	join := api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000}
	m := h.join(t, "g", first, join)
	renew := join
	renew.MemberID, renew.RenewToken = m.id, m.token
	var resp api.JoinResponse
	h.call(t, "POST", "/v1/groups/g/join", second, renew, http.StatusOK, &resp)
	e.remember(resp.MemberToken)
	h.stop(t)

	h = e.start(t)
	rejoin := join
	rejoin.MemberID = m.id
	h.expectError(t, "POST", "/v1/groups/g/join", first, rejoin, http.StatusConflict, api.CodeUnknownMember)
	checkRebound(t, e, h, first, second, "after a restart, ")
}

// oauthToken is a token of OAuth client c from /oauth/token.
func oauthToken(t *testing.T, e *env, h *harness, c coordinator.OAuthClientCreated) string {
	t.Helper()
	status, body, _ := tokenRequest(t, h, clientCredentialsForm(), []string{c.ClientID, c.ClientSecret})
	if status != http.StatusOK {
		t.Fatalf("token: %d %v", status, body)
	}
	e.remember(body["access_token"].(string))
	return body["access_token"].(string)
}

// checkRebound checks group g's one member is bound to credential
// renewed, not old: denying old leaves it, denying renewed ends it.
func checkRebound(t *testing.T, e *env, h *harness, old, renewed, when string) {
	t.Helper()
	revoke := func(credential string) {
		jti := claimsOf(t, credential)["jti"].(string)
		h.call(t, "POST", "/v1/admin/capabilities/"+jti+"/revoke", e.adminToken, coordinator.DenyRequest{}, http.StatusOK, nil)
	}
	members := func() int { return len(h.describe(t, "g").Members) }
	revoke(old)
	if n := members(); n != 1 {
		t.Fatalf("%sdenying the credential the member was renewed away from ended it (%d members)", when, n)
	}
	revoke(renewed)
	eventually(t, func() string {
		if n := members(); n != 0 {
			return fmt.Sprintf("%s%d members after denying the credential the member was renewed onto", when, n)
		}
		return ""
	})
}

// TestRenewalLeavesOldTokenGrantsShort is the coordinator's half of a
// carried-over member's heartbeat held across its renewal: a heartbeat
// with the old member token answered after the renewal mints its grants
// to expire with that old token (no capability outlives the member token
// it was asked with), while the machine counts them a full
// capability_lease and renews them only when half of that is left — so
// the next heartbeat, with the new token, renews nothing, and the member
// holds a partition whose capability runs out seconds after the old
// token, long before the renewal. A resync with the new token (what the
// SDK's driver asks for after such an answer) renews it under the new
// token.
func TestRenewalLeavesOldTokenGrantsShort(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	e.cfg.MemberTokenTTL = 20 * time.Second // the old token near its renewal: < capability_lease/2 (30 s) left
	h := e.start(t)
	cred := h.clientCredential(t, []string{"g"}, []string{"orders"})
	join := api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000}
	b := h.join(t, "g", cred, join)
	a := h.join(t, "g", cred, join)
	oldExp := time.Unix(int64(claimsOf(t, a.token)["exp"].(float64)), 0)

	renew := join
	renew.MemberID, renew.RenewToken = a.id, a.token
	var resp api.JoinResponse
	h.call(t, "POST", "/v1/groups/g/join", cred, renew, http.StatusOK, &resp)
	e.remember(resp.MemberToken)

	gw := newGateway(h, "gw1") // acks the fences: the handoff completes at b's release
	gw.poll(t, 0, 0)
	gw.run(500)
	defer gw.halt()
	revoke := b.heartbeat(t, 0).Revoke
	if len(revoke) != 1 {
		t.Fatalf("b revoked %+v, want one partition for a", revoke)
	}
	b.releaseAll(t, revoke, func(api.PartitionRef) int64 { return 0 })
	var moved api.Grant
	for _, g := range a.heartbeat(t, 2000).Grants { // with the old token
		moved = g
	}
	if moved.Capability == "" {
		t.Fatal("a's heartbeat brought no grant of the moved partition")
	}
	if moved.Capability == "" {
		t.Fatal("no grant for a")
	}
	exp := time.Unix(int64(claimsOf(t, moved.Capability)["exp"].(float64)), 0)
	if exp.After(oldExp) {
		t.Fatalf("grant answered to the old token expires %v after it", exp.Sub(oldExp))
	}
	for _, p := range h.describe(t, "g").Partitions {
		if p.Partition != moved.Partition {
			continue
		}
		machine, err := time.Parse(time.RFC3339Nano, p.CapabilityExpiresAt)
		if err != nil {
			t.Fatal(err)
		}
		renewFrom := machine.Add(-e.cfg.CapabilityLease / 2)
		if !renewFrom.After(oldExp.Add(5 * time.Second)) {
			t.Fatalf("the machine renews the moved partition from %v, the old token expires %v", renewFrom, oldExp)
		}
		t.Logf("the moved partition's capability ends with the old token; no heartbeat renews it for %v after", renewFrom.Sub(oldExp))
	}

	renewed := &member{h: h, group: "g", id: a.id, token: resp.MemberToken, grants: map[string]api.Grant{}, resync: true}
	var got api.Grant
	for _, g := range renewed.heartbeat(t, 0).Renew {
		if g.Partition == moved.Partition {
			got = g
		}
	}
	if got.Capability == "" {
		t.Fatal("a resync with the new member token did not renew the moved partition")
	}
	newExp := claimsOf(t, resp.MemberToken)["exp"].(float64)
	if exp := claimsOf(t, got.Capability)["exp"].(float64); exp != newExp {
		t.Fatalf("resync renewed the moved partition until %v, want the new member token's exp %v", exp, newExp)
	}
}

// TestRenewWithTheBoundCredentialRebinds: an admin-minted credential is
// its own tenant, so a renewal with another credential of the same name
// is unknown_member (the member token alone does not change whom the
// member belongs to) — and the Kafka listener and the SDK renewed such a
// member anew: release, leave and join, which in a group of several
// members handed its partitions to the others and back (a rebalance of
// the group every renewal). With renew_credential — the credential the
// member is bound to, beside the new one as the bearer — the holder
// proves it holds both, and the renewal rebinds the member in place:
// same member, denying the old credential leaves it, denying the new one
// ends it. A renew_credential the member is not bound to, of another
// name, or no credential at all proves nothing (409 as before).
func TestRenewWithTheBoundCredentialRebinds(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	h := e.start(t)
	bound := h.clientCredential(t, []string{"g"}, []string{"orders"})
	renewed := h.clientCredential(t, []string{"g"}, []string{"orders"})
	sameName := h.clientCredential(t, []string{"g"}, []string{"orders"})
	var otherName coordinator.ClientResponse
	h.call(t, "POST", "/v1/admin/clients", e.adminToken,
		coordinator.ClientRequest{Name: "other", Groups: []string{"g"}, Topics: []string{"orders"}, TTLMs: 3600_000}, 200, &otherName)
	e.remember(otherName.Credential)
	join := api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000}
	m := h.join(t, "g", bound, join)
	renew := func(proof string) api.JoinRequest {
		r := join
		r.MemberID, r.RenewToken, r.RenewCredential = m.id, m.token, proof
		return r
	}
	const path = "/v1/groups/g/join"
	for name, proof := range map[string]string{"none": "", "another of the name": sameName, "another name": otherName.Credential,
		"the member token": m.token, "not a token": "x.y.z", "the bearer itself": renewed} {
		t.Run(name, func(t *testing.T) {
			h.expectError(t, "POST", path, renewed, renew(proof), http.StatusConflict, api.CodeUnknownMember)
		})
	}
	var resp api.JoinResponse
	h.call(t, "POST", path, renewed, renew(bound), http.StatusOK, &resp)
	e.remember(resp.MemberToken)
	if resp.MemberID != m.id {
		t.Fatalf("renewal answered member %q, want %q", resp.MemberID, m.id)
	}
	checkRebound(t, e, h, bound, renewed, "")
}
