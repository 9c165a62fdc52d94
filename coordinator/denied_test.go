package coordinator_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
)

// TestDeniedTokensRefusedAtTheCoordinator: denying a client credential's
// jti stops it joining (409 capability_revoked), also after a restart;
// denying a member's capability stops its commits; other tokens are
// untouched.
func TestDeniedTokensRefusedAtTheCoordinator(t *testing.T) {
	e := newEnv(t, map[string]int32{"t": 2})
	e.fill(t, 1000) // commits name offsets up to 1000: the log must reach them
	h := e.start(t)
	cred := h.clientCredential(t, []string{"g"}, []string{"t"})
	other := h.clientCredential(t, []string{"g"}, []string{"t"})
	m := h.join(t, "g", other, api.JoinRequest{Topics: []string{"t"}})
	grant, ok := m.grant("t", 0)
	if !ok {
		t.Fatal("the lone member was not granted t/0")
	}

	deny(t, h, jtiOf(t, cred))
	status, body, _ := h.do(t, http.MethodPost, "/v1/groups/g/join", cred, api.JoinRequest{Topics: []string{"t"}})
	if status != http.StatusConflict || !strings.Contains(string(body), string(api.CodeCapabilityRevoked)) {
		t.Fatalf("join with a denied credential: %d %s", status, body)
	}
	deny(t, h, jtiOf(t, grant.Capability))
	status, body, _ = h.do(t, http.MethodPost, "/v1/groups/g/commit", m.token, api.CommitRequest{Offsets: []api.CommitOffset{
		{Topic: "t", Partition: 0, Offset: 1, Capability: grant.Capability}}})
	if status != http.StatusConflict || !strings.Contains(string(body), string(api.CodeCapabilityRevoked)) {
		t.Fatalf("commit with a denied capability: %d %s", status, body)
	}
	// Its holder may still release the partition with its last offset.
	status, body, _ = h.do(t, http.MethodPost, "/v1/groups/g/commit", m.token, api.CommitRequest{Release: true, Offsets: []api.CommitOffset{
		{Topic: "t", Partition: 0, Offset: 1, Capability: grant.Capability}}})
	if status != http.StatusOK || !strings.Contains(string(body), `"offset":1`) {
		t.Fatalf("release with a denied capability: %d %s", status, body)
	}
	h.join(t, "g", other, api.JoinRequest{Topics: []string{"t"}}) // the other credential still works

	h.stop(t)
	h = e.start(t)
	status, _, _ = h.do(t, http.MethodPost, "/v1/groups/g/join", cred, api.JoinRequest{Topics: []string{"t"}})
	if status != http.StatusConflict {
		t.Fatalf("denied credential joined after a restart: %d", status)
	}
}

func deny(t *testing.T, h *harness, jti string) {
	t.Helper()
	status, body, _ := h.do(t, http.MethodPost, "/v1/admin/capabilities/"+jti+"/revoke", h.env.adminToken, map[string]any{})
	if status != http.StatusOK {
		t.Fatalf("deny %s: %d %s", jti, status, body)
	}
}

// jtiOf reads the jti of a token without verifying it.
func jtiOf(t *testing.T, token string) string {
	t.Helper()
	jti, _ := claimsOf(t, token)["jti"].(string)
	return jti
}

// TestRevokedMemberIsToldWhy: every request with the member token of a
// member an administrator revoked is 409 unknown_member with the detail
// removed: revoked (api.DetailRemoved), so the SDK says it was revoked
// even when a heartbeat of its had failed before (it said "member
// expired"); a member that left gets unknown_member without it.
func TestRevokedMemberIsToldWhy(t *testing.T) {
	e := newEnv(t, map[string]int32{"t": 2})
	h := e.start(t)
	cred := h.clientCredential(t, []string{"g"}, []string{"t"})
	revoked := h.join(t, "g", cred, api.JoinRequest{Topics: []string{"t"}})
	left := h.join(t, "g", cred, api.JoinRequest{Topics: []string{"t"}})
	h.call(t, http.MethodPost, "/v1/admin/groups/g/members/"+revoked.id+"/revoke", h.env.adminToken, map[string]any{}, http.StatusOK, nil)
	h.call(t, http.MethodPost, "/v1/groups/g/leave", left.token, api.LeaveRequest{}, http.StatusOK, nil)
	for _, c := range []struct {
		m       *member
		removed any
	}{{revoked, api.RemovedRevoked}, {left, nil}} {
		for _, route := range []string{"heartbeat", "commit", "leave"} {
			var body any = api.HeartbeatRequest{}
			if route != "heartbeat" {
				body = map[string]any{}
			}
			status, raw, _ := h.do(t, http.MethodPost, "/v1/groups/g/"+route, c.m.token, body)
			var e api.ErrorBody
			if status != http.StatusConflict || json.Unmarshal(raw, &e) != nil || e.Error.Code != api.CodeUnknownMember || e.Error.Details[api.DetailRemoved] != c.removed {
				t.Errorf("%s of %s: %d %s, want 409 unknown_member with %s %v", route, c.m.id, status, raw, api.DetailRemoved, c.removed)
			}
		}
	}
}
