package coordinator_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestMemberTokenRejoinDoesNotOutliveItsCredential: a member could
// rejoin with its own member token, and each such rejoin answered a
// member token good for a fresh member_token_ttl — so it lived on for
// ever, past its credential. A rejoin's member token now expires no
// later than the presenting one, and one with less than a second left is
// refused.
func TestMemberTokenRejoinDoesNotOutliveItsCredential(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	now, advance := testClock()
	h := e.start(t, coordinator.WithClock(now))
	var out coordinator.ClientResponse
	h.call(t, "POST", "/v1/admin/clients", e.adminToken,
		coordinator.ClientRequest{Name: "short", Groups: []string{"g"}, Topics: []string{"orders"}, TTLMs: 10_000}, 200, &out)
	e.remember(out.Credential)
	m := h.join(t, "g", out.Credential, api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000})
	firstExp := claimsOf(t, m.token)["exp"].(float64)

	advance(3 * time.Second)
	var rejoined api.JoinResponse
	h.call(t, "POST", "/v1/groups/g/join", m.token, api.JoinRequest{MemberID: m.id, Topics: []string{"orders"}}, 200, &rejoined)
	e.remember(rejoined.MemberToken)
	if exp := claimsOf(t, rejoined.MemberToken)["exp"].(float64); exp > firstExp {
		t.Fatalf("a rejoin with the member token answered a token expiring at %v, the presenting one at %v", exp, firstExp)
	}

	advance(time.Unix(int64(firstExp), 0).Sub(now()) - 500*time.Millisecond)
	h.expectError(t, "POST", "/v1/groups/g/join", rejoined.MemberToken, api.JoinRequest{MemberID: m.id, Topics: []string{"orders"}}, 401, api.CodeTokenExpired)
}

// TestMemberDoesNotOutliveItsCredential: a join with a client credential
// that expires in 2 s answered a member token good for member_token_ttl
// (24 h), so the consumer went on heartbeating — renewing capabilities,
// reading — long after its credential lapsed. The member token now
// expires no later than the credential; once it has, the member's
// heartbeats are refused (401 token_expired), and a credential with
// under a second left cannot join. A denied credential cuts its member
// at once (409 unknown_member), expiry or not.
func TestMemberDoesNotOutliveItsCredential(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	now, advance := testClock()
	h := e.start(t, coordinator.WithClock(now))
	credential := func(ttl time.Duration) coordinator.ClientResponse {
		var out coordinator.ClientResponse
		h.call(t, "POST", "/v1/admin/clients", e.adminToken,
			coordinator.ClientRequest{Name: "short", Groups: []string{"g"}, Topics: []string{"orders"}, TTLMs: ttl.Milliseconds()}, 200, &out)
		e.remember(out.Credential)
		return out
	}
	short := credential(2 * time.Second)
	credExp := claimsOf(t, short.Credential)["exp"].(float64)
	m := h.join(t, "g", short.Credential, api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000})
	if exp := claimsOf(t, m.token)["exp"].(float64); exp > credExp {
		t.Fatalf("member token expires at %v, after its credential (%v)", exp, credExp)
	}
	h.call(t, "GET", "/v1/groups/g/offsets", m.token, nil, 200, nil) // good while the credential is

	advance(time.Unix(int64(credExp), 0).Sub(now()) + e.cfg.Leeway + time.Second)
	h.expectError(t, "POST", "/v1/groups/g/heartbeat", m.token, api.HeartbeatRequest{WaitMs: 0}, 401, api.CodeTokenExpired)

	dying := credential(time.Second)
	advance(500 * time.Millisecond)
	h.expectError(t, "POST", "/v1/groups/g/join", dying.Credential, api.JoinRequest{Topics: []string{"orders"}}, 401, api.CodeTokenExpired)
	// Expired, but within the leeway it verifies under: it says it
	// expired ("expires within a second" was said of one long gone).
	advance(e.cfg.Leeway)
	if status, b, _ := h.do(t, "POST", "/v1/groups/g/join", dying.Credential, api.JoinRequest{Topics: []string{"orders"}}); status != 401 ||
		!strings.Contains(string(b), "client credential expired 1s ago: join with a fresh one") {
		t.Fatalf("join with a credential expired within the leeway: %d %s", status, b)
	}

	long := credential(time.Hour)
	n := h.join(t, "g", long.Credential, api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000})
	h.call(t, "GET", "/v1/groups/g/offsets", n.token, nil, 200, nil)
	h.call(t, "POST", "/v1/admin/capabilities/"+long.JTI+"/revoke", e.adminToken, coordinator.DenyRequest{}, 200, nil)
	h.expectError(t, "POST", "/v1/groups/g/heartbeat", n.token, api.HeartbeatRequest{WaitMs: 0}, 409, api.CodeUnknownMember)
}

// testClock is a clock the test moves: now reads it, advance moves it.
func testClock() (now func() time.Time, advance func(time.Duration)) {
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	return func() time.Time { return time.Unix(0, clock.Load()) }, func(d time.Duration) { clock.Add(int64(d)) }
}

// TestExpiredMemberTokenAtJoinSaysExpired: a rejoin with an expired
// member token was 401 unauthorized, "client credential: ... wrong token
// type" — the join tried it as a credential first and reported that
// error — so a client could not tell "expired: join with your
// credential" from "this is not a token". Now it is 401 token_expired,
// which clients act on. A capability at join says what a join takes.
func TestExpiredMemberTokenAtJoinSaysExpired(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	now, advance := testClock()
	h := e.start(t, coordinator.WithClock(now))
	credential := h.clientCredential(t, []string{"g"}, []string{"orders"})
	m := h.join(t, "g", credential, api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000})
	// A capability is neither kind a join takes: said so, not the
	// verifier's "wrong token type" for a credential.
	capability := m.grants["orders/0"].Capability
	if status, body, _ := h.do(t, "POST", "/v1/groups/g/join", capability, api.JoinRequest{Topics: []string{"orders"}}); status != 401 ||
		errorCode(t, body) != api.CodeUnauthorized || !strings.Contains(string(body), "neither") {
		t.Fatalf("a join with a capability: %d %s, want 401 unauthorized saying what a join takes", status, body)
	}
	exp := claimsOf(t, m.token)["exp"].(float64)
	advance(time.Unix(int64(exp), 0).Sub(now()) + e.cfg.Leeway + time.Second)
	status, body, _ := h.do(t, "POST", "/v1/groups/g/join", m.token, api.JoinRequest{MemberID: m.id, Topics: []string{"orders"}})
	if status != 401 || errorCode(t, body) != api.CodeTokenExpired || !strings.Contains(string(body), "member token") {
		t.Fatalf("a rejoin with an expired member token: %d %s, want 401 token_expired naming the member token", status, body)
	}
}

// TestCapabilitiesDoNotOutliveTheMemberToken: the capabilities a join or
// heartbeat answers expire no later than the member token they were
// asked with (and so than its credential). A renewal just before the
// member token lapsed got a whole capability_lease, so a member whose
// credential expired fetched on for up to a lease (60 s) after it.
func TestCapabilitiesDoNotOutliveTheMemberToken(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	now, advance := testClock()
	h := e.start(t, coordinator.WithClock(now))
	lease := e.cfg.CapabilityLease
	var cred coordinator.ClientResponse
	h.call(t, "POST", "/v1/admin/clients", e.adminToken,
		coordinator.ClientRequest{Name: "short", Groups: []string{"g"}, Topics: []string{"orders"}, TTLMs: (lease * 3 / 4).Milliseconds()}, 200, &cred)
	e.remember(cred.Credential)
	credExp := time.Unix(int64(claimsOf(t, cred.Credential)["exp"].(float64)), 0)
	m := h.join(t, "g", cred.Credential, api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000})
	g, ok := m.grant("orders", 0)
	if !ok {
		t.Fatal("the join granted nothing")
	}
	if exp := capabilityExp(t, g); exp.After(credExp) {
		t.Fatalf("the join's capability expires at %s, after the credential (%s)", exp, credExp)
	}
	// Past half the lease the machine renews the capability.
	advance(lease/2 + time.Second)
	renewed := false
	for range 10 {
		resp := m.heartbeat(t, 1)
		for _, r := range resp.Renew {
			renewed = true
			if exp := capabilityExp(t, r); exp.After(credExp) {
				t.Fatalf("a renewal expires at %s, after the member token and the credential (%s)", exp, credExp)
			}
		}
		if renewed {
			return
		}
	}
	t.Fatal("no renewal past half the lease: the test did not reach the path it tests")
}

// capabilityExp is a grant's capability's exp, checked against the
// grant's expires_at.
func capabilityExp(t testing.TB, g api.Grant) time.Time {
	t.Helper()
	exp := time.Unix(int64(claimsOf(t, g.Capability)["exp"].(float64)), 0)
	if at, err := time.Parse(time.RFC3339, g.ExpiresAt); err != nil || !at.Equal(exp) {
		t.Fatalf("grant expires_at %q, its capability's exp %s", g.ExpiresAt, exp)
	}
	return exp
}
