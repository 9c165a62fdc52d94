package coordinator_test

import (
	"encoding/json"
	"html"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestConsoleMembersShowTheirCredential (newuser3 #5): a revoked member
// rejoins at once with its credential, and the Overrides page's deny needs
// that credential's id, which the console never showed. The group page's
// members table shows each member's credential id (and its name) and
// offers "Deny credential" for it; the deny goes through the console's
// action route like the Overrides page's — audited as console:admin — and
// ends the member and its rejoins. Fails without the column: the page
// has no data-credential and no deny-credential button.
func TestConsoleMembersShowTheirCredential(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	h := e.start(t)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	jti, _ := claimsOf(t, creds)["jti"].(string)
	sub, _ := claimsOf(t, creds)["sub"].(string)
	m := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})

	c := newConsoleClient(t, h)
	if a := c.login(e.adminToken, nil); a.status != 303 {
		t.Fatalf("login: %d", a.status)
	}
	page := c.send("GET", "/console/groups/g", nil, nil)
	if page.status != 200 {
		t.Fatalf("group page: %d %s", page.status, page.body)
	}
	body := html.UnescapeString(page.body)
	for _, want := range []string{
		`<th>credential</th>`,
		`<tr data-member="` + m.id + `" data-credential="` + jti + `">`,
		`<span class="mono">` + jti + `</span><span class="name">` + sub + `</span>`,
		`data-action="deny-credential" data-member="` + m.id + `" data-credential="` + jti + `"`,
		`data-action="revoke-member" data-member="` + m.id + `" data-credential="` + jti + `"`,
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("group page without %q:\n%s", want, body)
		}
	}

	// The button's action: the admin deny of that id, from the console.
	deny := c.action("POST", "/v1/admin/capabilities/"+jti+"/revoke", c.csrf(), c.origin, coordinator.RevokeRequest{Reason: "rejoins"})
	if deny.status != 200 {
		t.Fatalf("deny credential through the console: %d %s", deny.status, deny.body)
	}
	if d := h.describe(t, "g"); len(d.Members) != 0 {
		t.Fatalf("members after the credential's deny: %+v", d.Members)
	}
	if status, b, _ := h.do(t, "POST", "/v1/groups/g/join", creds, api.JoinRequest{Topics: []string{"orders"}}); status == 200 || !strings.Contains(string(b), "denied") {
		t.Fatalf("a rejoin with the denied credential: %d %s", status, b)
	}
	var audit coordinator.AuditResponse
	h.call(t, "GET", "/v1/admin/audit", e.adminToken, nil, 200, &audit)
	if len(audit.Entries) == 0 || audit.Entries[0].Who != "console:admin" || audit.Entries[0].Action != "capability_revoke" ||
		audit.Entries[0].Target != jti || audit.Entries[0].Reason != "rejoins" || audit.Entries[0].Result != "ok" {
		t.Fatalf("audit after the console's deny: %+v", audit.Entries)
	}
}

// TestConsoleProblemPages (newuser3 #10): an unknown group's page names
// it (it said "console: not found"; now the admin API's "unknown group nosuch"); an unknown console path is the
// Problem page to a browser (it was the raw JSON error, shown as text),
// and stays the JSON error body to a client asking for JSON, or for
// anything (curl's */*), or for nothing.
func TestConsoleProblemPages(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	c := newConsoleClient(t, h)
	if a := c.login(e.adminToken, nil); a.status != 303 {
		t.Fatalf("login: %d", a.status)
	}
	browser := "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"

	page := c.send("GET", "/console/groups/nosuch", nil, map[string]string{"Accept": browser})
	if page.status != 404 || !strings.Contains(html.UnescapeString(page.body), `<p class="error">unknown group nosuch</p>`) {
		t.Fatalf("unknown group's page: %d\n%s", page.status, page.body)
	}

	page = c.send("GET", "/console/nosuch", nil, map[string]string{"Accept": browser})
	if page.status != 404 || !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(html.UnescapeString(page.body), `<p class="error">no such console page: GET "/console/nosuch"</p>`) ||
		!strings.Contains(page.body, `<a href="/console/groups">`) {
		t.Fatalf("unknown console path, to a browser: %d %s\n%s", page.status, page.header.Get("Content-Type"), page.body)
	}
	if page.header.Get("Content-Security-Policy") == "" {
		t.Fatal("the Problem page without the console's CSP")
	}
	for _, accept := range []string{"application/json", "*/*", "", "text/html;q=0.5, application/json"} {
		a := c.send("GET", "/console/nosuch", nil, map[string]string{"Accept": accept})
		var body struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if a.status != 404 || a.header.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(a.body), &body) != nil ||
			body.Error.Code != "not_found" || !strings.Contains(body.Error.Message, "/console/nosuch") {
			t.Fatalf("unknown console path, Accept %q: %d %s %s", accept, a.status, a.header.Get("Content-Type"), a.body)
		}
	}
	// A POST (an action's fetch) is answered in JSON whatever it accepts.
	if a := c.send("POST", "/console/nosuch", nil, map[string]string{"Accept": browser}); a.status != 404 || a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("POST to an unknown console path: %d %s", a.status, a.header.Get("Content-Type"))
	}
}
