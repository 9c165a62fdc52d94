package coordinator_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
)

// TestJoinNamesAnUnconfiguredIssuer (redteam2 F): a join whose token
// names an issuer that is neither the coordinator's nor a configured
// OIDC issuer — the configured one plus a trailing slash, as Auth0 and
// Okta write theirs, or another one — is 401 with a message naming the
// token's iss (bounded and escaped) and, for the slash, saying so.
// Before, such a token went to the client-credential verifier and was
// answered "client credential refused: ocap: malformed claims: unknown
// claim \"groups\"". An IdP token refused for a group is called an
// identity token, not a client credential; capgate's own credentials
// join as before.
func TestJoinNamesAnUnconfiguredIssuer(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	idp := idptest.New(t, "ES256")
	e.cfg.OIDC.Issuers = []identity.IssuerConfig{{Issuer: idp.URL, CAFile: idp.CAFile, Audiences: []string{"capgate"},
		Rules: []identity.Rule{{Claim: "groups", Value: "kafka-billing", Groups: []string{"billing-*"}, Topics: []string{"orders"}}}}}
	h := e.start(t)
	now := time.Now()
	token := func(iss string) string {
		return idp.Token(idptest.Claims{"iss": iss, "sub": "svc-7", "aud": "capgate", "iat": now.Unix(),
			"exp": now.Add(time.Hour).Unix(), "groups": []string{"kafka-billing"}})
	}
	orders := api.JoinRequest{Topics: []string{"orders"}}
	long := "https://idp.example/\"\n\x1b[31m" + strings.Repeat("a", 4000)
	for _, c := range []struct {
		name, iss string
		want      []string
		never     []string
	}{
		{"trailing slash", idp.URL + "/",
			[]string{`issuer "` + idp.URL + `/" is not a configured OIDC issuer`, `only by a trailing slash`, `"` + idp.URL + `"`}, nil},
		{"another issuer", "https://evil.example",
			[]string{`issuer "https://evil.example" is not a configured OIDC issuer`}, []string{"trailing slash"}},
		{"long, with quotes and control characters", long,
			[]string{`issuer "https://idp.example/\"\n\x1b[31maaaa`}, []string{"\n", "\x1b", strings.Repeat("a", 200)}},
	} {
		status, body, _ := h.do(t, "POST", "/v1/groups/billing-eu/join", token(c.iss), orders)
		var answer api.ErrorBody
		if err := json.Unmarshal(body, &answer); err != nil || status != 401 || answer.Error.Code != api.CodeUnauthorized {
			t.Fatalf("%s: %d %s, want 401 unauthorized", c.name, status, body)
		}
		msg := answer.Error.Message
		t.Logf("%s: %s", c.name, msg)
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: message %q lacks %q", c.name, msg, w)
			}
		}
		for _, n := range append(c.never, "client credential", "malformed claims") {
			if strings.Contains(msg, n) {
				t.Errorf("%s: message %q has %q", c.name, msg, n)
			}
		}
		if len(msg) > 600 {
			t.Errorf("%s: message of %d bytes", c.name, len(msg))
		}
	}

	// The configured issuer's token for a group its rules do not grant.
	status, body, _ := h.do(t, "POST", "/v1/groups/payments/join", token(idp.URL), orders)
	var answer api.ErrorBody
	if err := json.Unmarshal(body, &answer); err != nil || status != 403 || answer.Error.Message != "identity token does not allow group payments" {
		t.Fatalf("IdP token, group outside its rules: %d %s", status, body)
	}
	h.join(t, "billing-eu", token(idp.URL), orders)
	h.join(t, "billing-us", h.clientCredential(t, []string{"billing-us"}, []string{"orders"}), orders)
	e.checkLogs(t)
}

// TestIdPRefusalsSayWhy is dayone2's first day with a Keycloak realm: a
// token for another audience (Keycloak's default aud is "account") was
// "401 identity token refused: … token has invalid audience", and a
// token whose groups claim holds the full group path ("/kafka-billing",
// Keycloak's default) was "403 identity token maps to no capgate group
// (oidc rules)" — neither said what the token held nor which setting to
// change. Each answer now names both; a token that does map joins.
func TestIdPRefusalsSayWhy(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	idp := idptest.New(t, "RS256")
	e.cfg.OIDC.Issuers = []identity.IssuerConfig{{
		Issuer: idp.URL, CAFile: idp.CAFile, Audiences: []string{"capgate"},
		Rules: []identity.Rule{
			{Claim: "groups", Value: "kafka-billing", Groups: []string{"billing-*"}, Topics: []string{"orders"}},
			{Claim: "realm_access.roles", Value: "kafka-ops", Groups: []string{"ops"}, Topics: []string{"orders"}},
		},
	}}
	h := e.start(t)
	now := time.Now()
	token := func(aud string, groups ...string) string {
		tok := idp.Token(idptest.Claims{"sub": "svc-billing", "aud": aud, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
			"groups": groups})
		e.remember(tok)
		return tok
	}
	join := func(tok string) (int, string) {
		status, body, _ := h.do(t, "POST", "/v1/groups/billing-eu/join", tok, api.JoinRequest{Topics: []string{"orders"}})
		var e api.ErrorBody
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("join: %d %s: %v", status, body, err)
		}
		return status, e.Error.Message
	}

	status, body := join(token("account", "kafka-billing"))
	if want := "identity token refused: token has "; !strings.HasPrefix(body, want) {
		t.Fatalf("a token for audience account: %q, want it to start %q (the refusal said once)", body, want)
	}
	for _, want := range []string{`aud ["account"]`, `audiences ["capgate"]`, "its audiences: oidc.issuers[] on the coordinator"} {
		if status != 401 || !strings.Contains(body, want) {
			t.Fatalf("a token for audience account: %d %s, want 401 naming %s", status, body, want)
		}
	}
	status, body = join(token("capgate", "/kafka-billing", "/staff"))
	for _, want := range []string{`groups: ["/kafka-billing" "/staff"]`, "realm_access.roles: absent", `write the value as "/kafka-billing"`} {
		if status != 403 || !strings.Contains(body, want) {
			t.Fatalf("a token with Keycloak's full group paths: %d %s, want 403 naming %s", status, body, want)
		}
	}
	if strings.Contains(body, "kafka-ops") {
		t.Fatalf("the 403 quotes a rule's value the token does not hold: %s", body)
	}
	h.join(t, "billing-eu", token("capgate", "kafka-billing"), api.JoinRequest{Topics: []string{"orders"}})
}
