package coordinator_test

import (
	"testing"

	"github.com/capgate/capgate/api"
)

// TestOAuthClientHasMembersAsOneTenant: the attack is an OAuth client
// whose tokens each had members in groups_per_credential groups — the
// live-members half of the bound was counted per credential, so one
// client's 3 tokens had members in 6 groups with the limit at 2. Each
// token now joins an existing group (others created them): the 3rd group
// is refused 409 limit_exceeded naming the tenant, counted under
// groups_per_credential in /metrics; a group the client already has
// members in takes more; after a restart the members still count for
// the client (the tenant is stored with each member).
func TestOAuthClientHasMembersAsOneTenant(t *testing.T) {
	e, clock := creatorEnv(t, 20)
	h := e.start(t, clock.option())
	a := createOAuthClient(t, h, "a", []string{"*"})
	b, c := createOAuthClient(t, h, "b", []string{"*"}), createOAuthClient(t, h, "c", []string{"*"})
	req := api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000}
	h.join(t, "g1", h.oauthToken(t, b), req)
	h.join(t, "g2", h.oauthToken(t, b), req)
	h.join(t, "g3", h.oauthToken(t, c), req)
	h.join(t, "g4", h.oauthToken(t, c), req)
	tokens := []string{h.oauthToken(t, a), h.oauthToken(t, a), h.oauthToken(t, a)}

	joined := 0
	for i, tok := range tokens {
		for _, name := range []string{"g1", "g2", "g3", "g4"}[i:][:2] {
			if status, _, _ := h.do(t, "POST", "/v1/groups/"+name+"/join", tok, req); status == 200 {
				joined++
			}
		}
	}
	var with []string
	for _, name := range []string{"g1", "g2", "g3", "g4"} {
		for _, m := range h.describe(t, name).Members {
			if m.Credential != nil && m.Credential.Subject == "oauth:"+a.ClientID {
				with = append(with, name)
				break
			}
		}
	}
	if len(with) != 2 {
		t.Fatalf("one OAuth client's 3 tokens have members in groups %v (%d joins granted), want groups_per_credential (2)", with, joined)
	}
	refused := func(tok, name string) {
		t.Helper()
		status, body, _ := h.do(t, "POST", "/v1/groups/"+name+"/join", tok, req)
		if d := errorDetails(t, body); status != 409 || errorCode(t, body) != api.CodeLimitExceeded ||
			d["limit"] != "coordinator.groups.limits.groups_per_credential" || d["tenant"] != "oauth:"+a.ClientID {
			t.Fatalf("client a's token joining %s: %d %s, want 409 limit_exceeded naming its tenant", name, status, body)
		}
	}
	refused(tokens[2], "g4")
	if got := h.metric(t, `capgate_coordinator_join_limit_refusals_total{limit="groups_per_credential"}`); got < 1 {
		t.Fatalf(`join_limit_refusals_total{limit="groups_per_credential"} = %v`, got)
	}
	h.join(t, with[0], tokens[2], req)

	h.stop(t)
	h = e.start(t, clock.option())
	refused(tokens[1], "g4")
}
