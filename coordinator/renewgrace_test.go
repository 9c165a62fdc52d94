package coordinator_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// graceEnv is a coordinator on a test clock whose member tokens live
// 30 s (credentials an hour), with renew_token_grace 5 s and the
// default leeway (2 s) and max_clock_skew (1 s).
func graceEnv(t *testing.T) (*env, *harness, func(time.Duration)) {
	t.Helper()
	e := newEnv(t, map[string]int32{"orders": 2})
	e.cfg.MemberTokenTTL = 30 * time.Second
	e.cfg.Groups.RenewTokenGrace = 5 * time.Second
	now, advance := testClock()
	return e, e.start(t, coordinator.WithClock(now)), advance
}

// renewal is the carry-over's rejoin of m: its member token as
// renew_token, the subscription unchanged.
func renewal(m *member) api.JoinRequest {
	return api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000, MemberID: m.id, RenewToken: m.token}
}

// expOf is a token's exp.
func expOf(t *testing.T, token string) time.Time {
	t.Helper()
	return time.Unix(int64(claimsOf(t, token)["exp"].(float64)), 0)
}

// TestRenewalInGraceKeepsTheMember: a renewal whose member token expired
// less than groups.renew_token_grace beyond the leeway ago — a Kafka
// client's re-authentication that met a coordinator takeover — renews
// the member in place (same id, a new member token) when its bearer is
// the credential the member is bound to; past the grace it is 401
// token_expired, as before. Before, any member token past the leeway
// was refused, and the Kafka listener's member ended (every partition
// revoked from the client, what it read since its last commit read
// again).
func TestRenewalInGraceKeepsTheMember(t *testing.T) {
	e, h, advance := graceEnv(t)
	cred := h.clientCredential(t, []string{"g"}, []string{"orders"})
	join := api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000}
	a, b := h.join(t, "g", cred, join), h.join(t, "g", cred, join)
	exp := expOf(t, a.token)
	advance(time.Until(exp) + e.cfg.Leeway + 2*time.Second) // past the leeway, inside the grace
	var resp api.JoinResponse
	h.call(t, "POST", "/v1/groups/g/join", cred, renewal(a), http.StatusOK, &resp)
	e.remember(resp.MemberToken)
	if resp.MemberID != a.id || resp.MemberToken == "" || !expOf(t, resp.MemberToken).After(exp) {
		t.Fatalf("renewal in the grace answered member %q (want %q), a token expiring %v", resp.MemberID, a.id, expOf(t, resp.MemberToken))
	}
	advance(4 * time.Second) // exp + leeway + 6 s: past the 5 s grace
	h.expectError(t, "POST", "/v1/groups/g/join", cred, renewal(b), http.StatusUnauthorized, api.CodeTokenExpired)
}

// TestRenewalGraceRevivesNoRevokedMember: the attacks on the grace. A
// member token expired inside the grace renews nothing that a
// revocation reached — whenever the revocation was made:
//   - the member token's own jti denied before it expired, the renewal
//     after the entry's plain lapse (exp + leeway + max_clock_skew): the
//     deny-list keeps it renew_token_grace longer (revocation.Rule.Retain);
//   - the same jti denied after it expired, inside the grace: the deny
//     is still recorded (the machine drops a deny whose entry would have
//     lapsed already);
//   - the member's credential (an OAuth client's token) denied after the
//     member token expired, the renewal by another token of the same
//     OAuth client (bound to the member as well): the deny ended the
//     member;
//   - the member revoked by an administrator;
//   - a credential the member is not bound to.
//
// Without the retention the first two renew the member (200).
func TestRenewalGraceRevivesNoRevokedMember(t *testing.T) {
	e, h, advance := graceEnv(t)
	cred := h.clientCredential(t, []string{"g"}, []string{"orders"})
	stranger := h.clientCredential(t, []string{"g"}, []string{"orders"})
	billing := createOAuthClient(t, h, "billing", []string{"g"})
	first, second := oauthToken(t, e, h, billing), oauthToken(t, e, h, billing)
	join := api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000}
	deniedEarly, deniedLate := h.join(t, "g", cred, join), h.join(t, "g", cred, join)
	oauthMember := h.join(t, "g", first, join)
	revoked, strangers := h.join(t, "g", cred, join), h.join(t, "g", cred, join)
	exp := expOf(t, deniedEarly.token)
	deny := func(token string) {
		t.Helper()
		h.call(t, "POST", "/v1/admin/capabilities/"+claimsOf(t, token)["jti"].(string)+"/revoke", e.adminToken,
			coordinator.DenyRequest{Exp: expOf(t, token).Unix(), Reason: "test"}, http.StatusOK, nil)
	}
	deny(deniedEarly.token)
	// exp + leeway + max_clock_skew + 1 s: the plain rule's entries
	// lapsed; inside exp + leeway + grace.
	advance(time.Until(exp) + e.cfg.Leeway + e.cfg.Groups.MaxClockSkew + time.Second)
	deny(deniedLate.token)
	deny(first)
	h.call(t, "POST", "/v1/admin/groups/g/members/"+revoked.id+"/revoke", e.adminToken, nil, http.StatusOK, nil)
	const path = "/v1/groups/g/join"
	for _, c := range []struct {
		name   string
		bearer string
		m      *member
		status int
		code   api.Code
	}{
		{"its member token denied before it expired", cred, deniedEarly, http.StatusConflict, api.CodeCapabilityRevoked},
		{"its member token denied after it expired", cred, deniedLate, http.StatusConflict, api.CodeCapabilityRevoked},
		{"its credential denied, renewed by another token of its OAuth client", second, oauthMember, http.StatusConflict, api.CodeUnknownMember},
		{"revoked by an administrator", cred, revoked, http.StatusConflict, api.CodeUnknownMember},
		{"a credential it is not bound to", stranger, strangers, http.StatusConflict, api.CodeUnknownMember},
	} {
		status, body, _ := h.do(t, "POST", path, c.bearer, renewal(c.m))
		if status != c.status || errorCode(t, body) != c.code {
			t.Errorf("%s: renewal in the grace answered %d %.200s, want %d %s", c.name, status, body, c.status, c.code)
		}
	}
}

// TestRenewalGraceRetentionSurvivesARestart: the retention is the
// machine's too — what it persists, and what a restarted coordinator (or
// a standby taking over: the same restore) reads back: a member token
// denied before it expired still refuses its renewal inside the grace
// after a restart past the entry's plain lapse. Without the machine's
// retention the restore dropped the lapsed entry, and the member was
// renewed (200).
func TestRenewalGraceRetentionSurvivesARestart(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	e.cfg.MemberTokenTTL = 30 * time.Second
	e.cfg.Groups.RenewTokenGrace = 5 * time.Second
	now, advance := testClock()
	h := e.start(t, coordinator.WithClock(now))
	cred := h.clientCredential(t, []string{"g"}, []string{"orders"})
	m := h.join(t, "g", cred, api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000})
	exp := expOf(t, m.token)
	h.call(t, "POST", "/v1/admin/capabilities/"+claimsOf(t, m.token)["jti"].(string)+"/revoke", e.adminToken,
		coordinator.DenyRequest{Exp: exp.Unix(), Reason: "test"}, http.StatusOK, nil)
	advance(time.Until(exp) + e.cfg.Leeway + e.cfg.Groups.MaxClockSkew + time.Second)
	h.describe(t, "g") // a step of the machine at the new time: its prune timers run, what they drop is persisted
	h.stop(t)
	h = e.start(t, coordinator.WithClock(now))
	status, body, _ := h.do(t, "POST", "/v1/groups/g/join", cred, renewal(m))
	if status != http.StatusConflict || errorCode(t, body) != api.CodeCapabilityRevoked {
		t.Fatalf("renewal in the grace of a member token denied before a restart: %d %.200s, want 409 capability_revoked", status, body)
	}
}

// TestRenewalInGraceRebindsAnAdminMintedCredentialsMember: a client
// renewed from one admin-minted credential onto another of the same name
// proves it holds the member's with renew_credential. Its member token
// expired with that credential (memberTokenTTL caps it there), so a
// carry-over that met a takeover presents both expired — and the grace
// takes both: the member is renewed in place and rebound, as Kafka keeps
// a membership across a re-authentication. The bounds hold: a member
// whose credential was denied inside the grace is not renewed, nor is one
// past it. Before, renew_credential was verified with no grace, proved
// nothing, and the renewal was 409 unknown_member: the client's member
// renewed anew, a rebalance (listener13's note).
func TestRenewalInGraceRebindsAnAdminMintedCredentialsMember(t *testing.T) {
	e, h, advance := graceEnv(t)
	shortLived := func() string {
		var out coordinator.ClientResponse
		h.call(t, "POST", "/v1/admin/clients", e.adminToken,
			coordinator.ClientRequest{Name: "svc", Groups: []string{"g"}, Topics: []string{"orders"}, TTLMs: 20_000}, http.StatusOK, &out)
		e.remember(out.Credential)
		return out.Credential
	}
	bound, denied, late := shortLived(), shortLived(), shortLived()
	renewed := h.clientCredential(t, []string{"g"}, []string{"orders"}) // "svc", an hour
	join := api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000}
	m, d, l := h.join(t, "g", bound, join), h.join(t, "g", denied, join), h.join(t, "g", late, join)
	exp := expOf(t, bound)
	if m.token == "" || expOf(t, m.token).After(exp) || expOf(t, m.token).Before(exp.Add(-time.Second)) {
		t.Fatalf("member token expires %v, want with its credential at %v", expOf(t, m.token), exp)
	}
	renew := func(m *member, proof string) api.JoinRequest {
		r := renewal(m)
		r.RenewCredential = proof
		return r
	}
	advance(time.Until(exp) + e.cfg.Leeway + 2*time.Second) // past the leeway, inside the grace
	h.call(t, "POST", "/v1/admin/capabilities/"+claimsOf(t, denied)["jti"].(string)+"/revoke", e.adminToken,
		coordinator.DenyRequest{Exp: exp.Unix(), Reason: "test"}, http.StatusOK, nil)
	const path = "/v1/groups/g/join"
	var resp api.JoinResponse
	h.call(t, "POST", path, renewed, renew(m, bound), http.StatusOK, &resp)
	e.remember(resp.MemberToken)
	if resp.MemberID != m.id || !expOf(t, resp.MemberToken).After(exp) {
		t.Fatalf("renewal in the grace answered member %q (want %q), a token expiring %v", resp.MemberID, m.id, expOf(t, resp.MemberToken))
	}
	status, body, _ := h.do(t, "POST", path, renewed, renew(d, denied))
	if status != http.StatusConflict || errorCode(t, body) != api.CodeUnknownMember {
		t.Errorf("renewal in the grace from a credential denied inside it: %d %.200s, want 409 unknown_member", status, body)
	}
	advance(4 * time.Second) // exp + leeway + 6 s: past the 5 s grace
	h.expectError(t, "POST", path, renewed, renew(l, late), http.StatusUnauthorized, api.CodeTokenExpired)
	// Rebound: denying the credential it was renewed away from leaves it.
	h.call(t, "POST", "/v1/admin/capabilities/"+claimsOf(t, bound)["jti"].(string)+"/revoke", e.adminToken,
		coordinator.DenyRequest{Exp: exp.Unix(), Reason: "test"}, http.StatusOK, nil)
	var live int
	for _, mv := range h.describe(t, "g").Members {
		if mv.ID == m.id {
			live++
		}
	}
	if live != 1 {
		t.Fatalf("denying the credential the member was renewed away from ended it")
	}
}
