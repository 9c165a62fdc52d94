package coordinator_test

import (
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestOAuthClientRevokeAllOrNothing: the attack is a revoke stopped
// midway by groups.limits.denied. Denied one credential at a time, client
// a's revoke (3 live credentials, room for 2) denied two, was refused on
// the third, and left a revoked client whose third credential's member
// went on heartbeating (and taking capabilities) until it expired. Now
// the revoke is one all-or-none deny: a's is refused whole (409
// limit_exceeded naming the setting) with the client not revoked and
// every member as before; b's 2 fit, and all its members are revoked.
func TestOAuthClientRevokeAllOrNothing(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.Groups.Limits.Denied = 2
	e.cfg.JoinRate, e.cfg.JoinBurst = 1000, 1000
	h := e.start(t)
	a, b := createOAuthClient(t, h, "a", []string{"*"}), createOAuthClient(t, h, "b", []string{"*"})
	req := api.JoinRequest{Topics: []string{"orders"}}
	open := func(o coordinator.OAuthClientCreated, n int) []*member {
		var members []*member
		for range n {
			members = append(members, h.join(t, "g", h.oauthToken(t, o), req))
		}
		return members
	}
	aMembers, bMembers := open(a, 3), open(b, 2)

	status, body, _ := h.do(t, "POST", "/v1/admin/oauth/clients/"+a.ClientID+"/revoke", e.adminToken, nil)
	for i, m := range aMembers {
		if _, err := m.tryHeartbeat(1); err != nil {
			t.Errorf("after a refused revoke (%d %s), a's member %d: %v; want it live as before", status, body, i, err)
		}
	}
	if d := errorDetails(t, body); status != 409 || errorCode(t, body) != api.CodeLimitExceeded ||
		d["limit"] != "coordinator.groups.limits.denied" || d["max"] != float64(2) {
		t.Fatalf("a's revoke: %d %s, want 409 limit_exceeded naming groups.limits.denied", status, body)
	}
	var list coordinator.OAuthClientsResponse
	h.call(t, "GET", "/v1/admin/oauth/clients", e.adminToken, nil, 200, &list)
	for _, c := range list.Clients {
		if c.RevokedAt != "" || c.LiveTokens == 0 {
			t.Fatalf("after a refused revoke: client %+v", c)
		}
	}
	h.join(t, "g2", h.oauthToken(t, a), req)

	var revoked coordinator.OAuthClientRevoked
	h.call(t, "POST", "/v1/admin/oauth/clients/"+b.ClientID+"/revoke", e.adminToken, nil, 200, &revoked)
	if revoked.Denied != 2 {
		t.Fatalf("b's revoke denied %d credentials, want 2", revoked.Denied)
	}
	for _, m := range bMembers {
		h.expectError(t, "POST", "/v1/groups/g/heartbeat", m.token, api.HeartbeatRequest{}, 409, api.CodeUnknownMember)
	}
}
