package coordinator_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/store"
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

// failAfterDeny is the coordinator's store failing the one write that
// follows the write storing jti's denial (arm sets jti): the state log
// lost between an OAuth client revoke's deny and the write that stores
// the client revoked.
type failAfterDeny struct {
	store.Backend
	mu       sync.Mutex
	jti      string
	failNext bool
	failed   int
}

func (f *failAfterDeny) arm(jti string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jti = jti
}

func (f *failAfterDeny) Update(fn func(w *store.Writer) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNext {
		f.failNext, f.failed = false, f.failed+1
		return errors.New("state log unreachable")
	}
	if err := f.Backend.Update(fn); err != nil || f.jti == "" {
		return err
	}
	if snap, err := f.Backend.Load(); err == nil && slices.ContainsFunc(snap.Denied, func(d store.Denied) bool { return d.JTI == f.jti }) {
		f.failNext, f.jti = true, ""
	}
	return nil
}

// TestOAuthClientRevokeSaysWhatLanded: an OAuth client's revoke denies
// its live credentials (a machine event, persisted: their members are
// revoked) and then stores the client revoked; when that second write
// fails, the answer says the first landed — details.applied partly, the
// credentials denied, the client not yet revoked, repeat to finish —
// where it said only 503 "store the revocation: …", as if nothing had
// happened, while the client's members were gone. The repeat finishes
// it: 200, and the client obtains no more credentials. Fails without.
func TestOAuthClientRevokeSaysWhatLanded(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	st, err := store.Open(e.cfg.DataDir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	failing := &failAfterDeny{Backend: st}
	h := e.start(t, coordinator.WithBackend(failing))
	billing := createOAuthClient(t, h, "billing", []string{"g"})
	token := h.oauthToken(t, billing)
	m := h.join(t, "g", token, api.JoinRequest{Topics: []string{"orders"}})
	failing.arm(claimsOf(t, token)["jti"].(string))

	path := "/v1/admin/oauth/clients/" + billing.ClientID + "/revoke"
	status, body, _ := h.do(t, "POST", path, e.adminToken, nil)
	if status != http.StatusServiceUnavailable || errorCode(t, body) != api.CodeUnavailable || errorDetails(t, body)["applied"] != "partly" ||
		!strings.Contains(string(body), "repeat the revoke") {
		t.Fatalf("the revoke whose deny landed and whose client write failed: %d %s, want 503 unavailable, details.applied partly, saying to repeat it", status, body)
	}
	if failing.failed != 1 {
		t.Fatalf("%d writes failed, want the one after the deny", failing.failed)
	}
	h.expectError(t, "POST", "/v1/groups/g/heartbeat", m.token, api.HeartbeatRequest{}, http.StatusConflict, api.CodeUnknownMember)

	var revoked coordinator.OAuthClientRevoked
	h.call(t, "POST", path, e.adminToken, nil, http.StatusOK, &revoked)
	if status, body, _ := tokenRequest(t, h, clientCredentialsForm(), []string{billing.ClientID, billing.ClientSecret}); status == http.StatusOK {
		t.Fatalf("the revoked client obtained a credential: %v", body)
	}
}
