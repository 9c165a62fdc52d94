package console

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
)

// TestConsoleIdPLogin: in a real Chromium, a JWT of the configured OIDC
// issuer whose role claim matches console_admins logs in to the console
// (the page names the identity; the token is in neither the page nor the
// URL, nothing in web storage); an action she takes shows in the console's
// audit view under her name; a token of the same issuer that may only
// join groups, one for another audience, and one of an identity an admin
// denied are each refused at the login form; denying her identity ends
// the session she has open.
func TestConsoleIdPLogin(t *testing.T) {
	idp := idptest.New(t, "RS256")
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: 4, CoordinatorConfig: func(cfg *coordinator.Config) {
		cfg.OIDC.Issuers = []identity.IssuerConfig{{
			Issuer: idp.URL, CAFile: idp.CAFile, Audiences: []string{"capgate"},
			Rules:         []identity.Rule{{Claim: "groups", Value: "kafka-billing", Groups: []string{"billing-*"}}},
			ConsoleAdmins: []identity.Match{{Claim: "realm_access.roles", Value: "capgate-admin"}},
		}}
	}})
	base := cluster.CoordinatorURL
	token := func(sub string, extra idptest.Claims) string {
		now := time.Now()
		c := idptest.Claims{"sub": sub, "aud": "capgate", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
		for k, v := range extra {
			c[k] = v
		}
		return idp.Token(c)
	}
	operator := idptest.Claims{"realm_access": map[string]any{"roles": []string{"capgate-admin"}}}
	b := newBrowser(t)

	// Each refusal says why (dayone2: before, all of them read "That is not
	// an admin token, nor an operator's token of a trusted identity
	// provider." and the coordinator logged nothing).
	refused := func(what, tok, why string) {
		t.Helper()
		loginPasted(b, base, tok)
		b.waitFor(what+" refused", time.Now(), 10*time.Second,
			`location.pathname === '/console/login' && document.querySelector('#login-error')?.textContent.includes('not an admin token')`)
		if got := eval[string](b, `document.querySelector('#login-error').textContent`); !strings.Contains(got, why) {
			t.Fatalf("%s: the login form says %q, want it to say %q", what, got, why)
		}
	}
	refused("a member's IdP token", token("svc-billing", idptest.Claims{"groups": []string{"kafka-billing"}}),
		`none of this issuer's console_admins (oidc.issuers[].console_admins) matches; the token holds realm_access.roles: absent`)
	refused("an operator token for another audience", token("alice", idptest.Claims{"aud": "grafana", "realm_access": operator["realm_access"]}),
		`token has aud ["grafana"], none of this issuer's audiences ["capgate"]`)
	refused("an expired operator token", idp.Token(idptest.Claims{"sub": "alice", "aud": "capgate", "iat": time.Now().Add(-2 * time.Hour).Unix(),
		"exp": time.Now().Add(-time.Hour).Unix(), "realm_access": operator["realm_access"]}), "refused: it expired")
	refused("a token that is no JWT", "not-a-token", "trusted identity provider.")

	alice := token("alice", operator)
	loginPasted(b, base, alice)
	b.waitFor("groups page after an IdP login", time.Now(), 10*time.Second,
		`location.pathname === '/console/groups' && document.getElementById('who')?.textContent.startsWith('alice (')`)
	stored := eval[string](b, `document.cookie + '|' + localStorage.length + '|' + sessionStorage.length`)
	if stored != "|0|0" {
		t.Fatalf("script-visible cookies or web storage after login: %q", stored)
	}
	if strings.Contains(eval[string](b, `location.href + document.documentElement.outerHTML`), alice) {
		t.Fatal("the IdP token is in the page or its URL")
	}

	// Alice denies a capability id from the console (with the page's CSRF
	// token); the audit log — GET /v1/admin/audit, shown by the console's
	// Audit view — names her as who did it, with the reason.
	status := eval[int](b, `fetch('/console/api/v1/admin/capabilities/bGVha2VkLWp0aS0wMDAwMQ/revoke', {method: 'POST', credentials: 'same-origin',
		headers: {'Content-Type': 'application/json', 'X-CSRF-Token': document.querySelector('form.logout input[name=csrf]').value},
		body: JSON.stringify({reason: 'found in a paste'})}).then(r => r.status)`)
	if status != http.StatusOK {
		t.Fatalf("deny from the console as an IdP operator: %d", status)
	}
	b.run("audit page", 20*time.Second, chromedp.Navigate(base+"/console/audit"))
	b.waitFor("the deny in the audit view, by alice", time.Now(), 10*time.Second,
		`[...document.querySelectorAll('#audit tbody tr')].some(tr => tr.textContent.includes('console:alice (') &&
		  tr.textContent.includes('bGVha2VkLWp0aS0wMDAwMQ') && tr.textContent.includes('found in a paste') && tr.textContent.includes('ok'))`)
	if !eval[bool](b, `document.querySelector('nav a[href="/console/audit"]') !== null`) {
		t.Fatal("no Audit link in the navigation although the coordinator keeps an audit log")
	}
	b.screenshot("audit")

	// An admin denies the operator's identity: her open session ends at
	// its next request (it lasted until the token's exp), and a fresh token
	// no longer logs in.
	id := identity.IdentityID(idp.URL, "alice")
	if status, raw := cluster.Admin(t, http.MethodPost, "/v1/admin/capabilities/"+id+"/revoke", json.RawMessage(`{}`), nil); status != http.StatusOK {
		t.Fatalf("deny: %d %s", status, raw)
	}
	b.run("groups page after the deny", 20*time.Second, chromedp.Navigate(base+"/console/groups"))
	b.waitFor("the denied operator's session ended", time.Now(), 10*time.Second, `location.pathname === '/console/login'`)
	status = eval[int](b, `fetch('/console/api/v1/admin/capabilities/bGVha2VkLWp0aS0wMDAwMg/revoke', {method: 'POST', credentials: 'same-origin',
		headers: {'Content-Type': 'application/json'}, body: '{}'}).then(r => r.status)`)
	if status != http.StatusUnauthorized {
		t.Fatalf("an action with the denied operator's session: %d, want 401", status)
	}
	refused("a denied operator's fresh token", token("alice", operator), "its identity "+id+" is denied")
	b.noProblems("IdP login")
}

// loginPasted logs in through the form with token pasted into the field,
// as an operator pastes a JWT: typing a kilobyte token key by key over
// CDP takes longer than the step's timeout on a loaded machine.
func loginPasted(b *browser, base, token string) {
	b.t.Helper()
	b.run("login form", 20*time.Second,
		chromedp.Navigate(base+"/console/login"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SetValue(chromedp.ID("token"), token),
		chromedp.Submit(chromedp.ID("login-form")),
	)
}
