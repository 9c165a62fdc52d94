package coordinator_test

import (
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
