package coordinator_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestMemberTokenRejoinDoesNotOutliveItsCredential: a member opened with
// a client credential that has since expired could rejoin with its own
// member token, and each such rejoin answered a member token good for a
// fresh member_token_ttl — so it lived on for ever. A rejoin's member
// token now expires no later than the presenting one, and one with less
// than a second left is refused.
func TestMemberTokenRejoinDoesNotOutliveItsCredential(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	advance := func(d time.Duration) { clock.Add(int64(d)) }
	h := e.start(t, coordinator.WithClock(now))
	var out coordinator.ClientResponse
	h.call(t, "POST", "/v1/admin/clients", e.adminToken,
		coordinator.ClientRequest{Name: "short", Groups: []string{"g"}, Topics: []string{"orders"}, TTLMs: 1000}, 200, &out)
	e.remember(out.Credential)
	m := h.join(t, "g", out.Credential, api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000})
	firstExp := claimsOf(t, m.token)["exp"].(float64)

	advance(3 * time.Second)
	h.expectError(t, "POST", "/v1/groups/g/join", out.Credential, api.JoinRequest{Topics: []string{"orders"}}, 401, api.CodeTokenExpired)
	var rejoined api.JoinResponse
	h.call(t, "POST", "/v1/groups/g/join", m.token, api.JoinRequest{MemberID: m.id, Topics: []string{"orders"}}, 200, &rejoined)
	e.remember(rejoined.MemberToken)
	if exp := claimsOf(t, rejoined.MemberToken)["exp"].(float64); exp > firstExp {
		t.Fatalf("a rejoin with the member token answered a token expiring at %v, the presenting one at %v", exp, firstExp)
	}

	advance(time.Unix(int64(firstExp), 0).Sub(now()) - 500*time.Millisecond)
	h.expectError(t, "POST", "/v1/groups/g/join", rejoined.MemberToken, api.JoinRequest{MemberID: m.id, Topics: []string{"orders"}}, 401, api.CodeTokenExpired)
}
