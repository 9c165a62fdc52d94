package coordinator_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// The console's security at the HTTP level; what a browser does with it is
// e2e/console's job.

// consoleClient talks to /console like a browser would, one request at a
// time, never following redirects, cookies held by hand.
type consoleClient struct {
	t       testing.TB
	h       *harness
	origin  string
	cookies map[string]string
	client  *http.Client
}

func newConsoleClient(t testing.TB, h *harness) *consoleClient {
	return &consoleClient{t: t, h: h, origin: h.base, cookies: map[string]string{},
		client: &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type consoleAnswer struct {
	status int
	body   string
	header http.Header
}

// send makes one request; headers are added as given ("" values
// skipped; "Host" replaces the request's Host header).
func (c *consoleClient) send(method, path string, body io.Reader, headers map[string]string) consoleAnswer {
	c.t.Helper()
	req, err := http.NewRequest(method, c.h.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	for k, v := range headers {
		switch {
		case v == "":
		case k == "Host":
			req.Host = v
		default:
			req.Header.Set(k, v)
		}
	}
	for k, v := range c.cookies {
		req.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	resp, err := c.client.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, ck := range resp.Cookies() {
		if ck.MaxAge < 0 || ck.Value == "" {
			delete(c.cookies, ck.Name)
		} else {
			c.cookies[ck.Name] = ck.Value
		}
	}
	return consoleAnswer{status: resp.StatusCode, body: string(b), header: resp.Header}
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]*)">`)

// login loads the login form and posts token with the form's login token.
func (c *consoleClient) login(token string, headers map[string]string) consoleAnswer {
	c.t.Helper()
	page := c.send("GET", "/console/login", nil, nil)
	m := csrfInput.FindStringSubmatch(page.body)
	if page.status != 200 || m == nil {
		c.t.Fatalf("login page: %d %s", page.status, page.body)
	}
	form := url.Values{"token": {token}, "csrf": {m[1]}}
	h := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": c.origin}
	for k, v := range headers {
		h[k] = v
	}
	return c.send("POST", "/console/login", strings.NewReader(form.Encode()), h)
}

// csrf reads the session's synchronizer token from a page.
func (c *consoleClient) csrf() string {
	c.t.Helper()
	page := c.send("GET", "/console/groups", nil, nil)
	m := csrfMeta.FindStringSubmatch(page.body)
	if page.status != 200 || m == nil || m[1] == "" {
		c.t.Fatalf("groups page: %d", page.status)
	}
	return m[1]
}

func (c *consoleClient) action(method, path, csrf, origin string, body any) consoleAnswer {
	c.t.Helper()
	b, _ := json.Marshal(body)
	return c.send(method, "/console/api"+path, bytes.NewReader(b),
		map[string]string{"Content-Type": "application/json", "X-CSRF-Token": csrf, "Origin": origin})
}

// TestConsoleLogin: the admin token is the only way in; a wrong token,
// another site's form, or a stale login form are refused; the session
// cookie is HttpOnly, SameSite=Strict, opaque; every answer carries the
// strict CSP; no token reaches a body, a URL or the logs.
func TestConsoleLogin(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	h := e.start(t)
	c := newConsoleClient(t, h)

	first := c.send("GET", "/console/groups", nil, nil)
	if first.status != 303 || !strings.HasSuffix(first.header.Get("Location"), "/console/login") {
		t.Fatalf("groups without a session: %d → %q, want 303 to the login page", first.status, first.header.Get("Location"))
	}
	for _, path := range []string{"/console/events?after=0", "/console/groups/g/live"} {
		if a := c.send("GET", path, nil, nil); a.status != 401 {
			t.Errorf("GET %s without a session: %d, want 401", path, a.status)
		}
	}
	csp := first.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) || strings.Contains(csp, "unsafe") {
			t.Fatalf("CSP %q lacks %q or allows unsafe sources", csp, want)
		}
	}
	if first.header.Get("X-Frame-Options") != "DENY" || first.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("framing/sniffing headers: %v", first.header)
	}

	if a := c.login("not-the-admin-token", nil); a.status != 401 || c.cookies["capgate_console"] != "" {
		t.Fatalf("wrong token: %d, session %q; want 401 and no session", a.status, c.cookies["capgate_console"])
	}
	if a := c.login(e.adminToken, map[string]string{"Origin": "https://evil.example"}); a.status != 403 || c.cookies["capgate_console"] != "" {
		t.Fatalf("login from another origin: %d, want 403", a.status)
	}
	stale := url.Values{"token": {e.adminToken}, "csrf": {"forged"}}
	if a := c.send("POST", "/console/login", strings.NewReader(stale.Encode()), map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "Origin": c.origin}); a.status != 403 {
		t.Fatalf("login with a forged login token: %d, want 403", a.status)
	}

	ok := c.login(e.adminToken, nil)
	if ok.status != 303 || !strings.HasSuffix(ok.header.Get("Location"), "/console/groups") {
		t.Fatalf("login: %d → %q", ok.status, ok.header.Get("Location"))
	}
	cookie := ""
	for _, v := range ok.header.Values("Set-Cookie") {
		if strings.HasPrefix(v, "capgate_console=") {
			cookie = v
		}
	}
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "path=/console", "max-age=3600"} {
		if !strings.Contains(strings.ToLower(cookie), strings.ToLower(want)) {
			t.Fatalf("session cookie %q lacks %s", cookie, want)
		}
	}
	if strings.Contains(strings.ToLower(cookie), "secure") {
		t.Fatalf("session cookie %q is Secure on plain HTTP: the browser would drop it", cookie)
	}
	session := c.cookies["capgate_console"]
	if len(session) != 43 || strings.Contains(session, e.adminToken) {
		t.Fatalf("session id %q is not an opaque 256-bit id", session)
	}
	page := c.send("GET", "/console/groups", nil, nil)
	if page.status != 200 || strings.Contains(page.body, e.adminToken) || !strings.Contains(page.body, `id="groups"`) {
		t.Fatalf("groups page after login: %d", page.status)
	}
	// The audit view reads GET /v1/admin/audit (audit.go).
	if a := c.send("GET", "/console/audit", nil, nil); a.status != 200 || !strings.Contains(page.body, "/console/audit") || !strings.Contains(a.body, `id="audit"`) {
		t.Fatalf("audit view: %d (link shown: %v)", a.status, strings.Contains(page.body, "/console/audit"))
	}

	csrf := c.csrf()
	if a := c.send("POST", "/console/logout", strings.NewReader(""), map[string]string{"Origin": c.origin}); a.status != 403 {
		t.Fatalf("logout without the CSRF token: %d, want 403", a.status)
	}
	out := c.send("POST", "/console/logout", strings.NewReader(url.Values{"csrf": {csrf}}.Encode()),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": c.origin})
	if out.status != 303 {
		t.Fatalf("logout: %d", out.status)
	}
	c.cookies["capgate_console"] = session // the old cookie is dead server-side
	if a := c.send("GET", "/console/groups", nil, nil); a.status != 303 {
		t.Fatalf("groups with a logged-out session: %d, want 303 to login", a.status)
	}
	e.checkLogs(t)
}

// TestConsoleRedirectsIgnoreTheHostHeader: every redirect of the console
// (no session → login page, the root, a login, a logout) names a path of
// this host, whatever Host header the request carried. fasthttp's
// ctx.Redirect made the Location absolute from the Host header: a request
// with Host: evil.example was sent to http://evil.example/console/login,
// an answer a proxy or cache in front could keep and hand to others.
func TestConsoleRedirectsIgnoreTheHostHeader(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	c := newConsoleClient(t, h)
	const evil = "evil.example"
	hostile := map[string]string{"Host": evil}
	redirected := func(what string, a consoleAnswer, want string) {
		t.Helper()
		if got := a.header.Get("Location"); a.status != 303 || got != want {
			t.Errorf("%s with Host: %s: %d Location %q, want 303 Location %q (a path, no host)", what, evil, a.status, got, want)
		}
	}
	redirected("GET /console/groups without a session", c.send("GET", "/console/groups", nil, hostile), "/console/login")
	redirected("GET /console without a session", c.send("GET", "/console", nil, hostile), "/console/login")

	// The login form's origin check compares Origin with the Host header,
	// so a client choosing both gets as far as the login's redirect.
	c.origin = "http://" + evil
	redirected("POST /console/login", c.login(e.adminToken, hostile), "/console/groups")
	if c.cookies["capgate_console"] == "" {
		t.Fatal("no session after the login")
	}
	redirected("GET /console with a session", c.send("GET", "/console", nil, hostile), "/console/groups")
	csrf := c.csrf()
	out := c.send("POST", "/console/logout", strings.NewReader(url.Values{"csrf": {csrf}}.Encode()),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": c.origin, "Host": evil})
	redirected("POST /console/logout", out, "/console/login")
}

// TestConsoleActionRefusals: a state-changing console request needs the
// session, the session's CSRF token and this origin; it reaches only the
// listed admin actions; refused ones change nothing. The accepted revoke
// answers with the new epoch once the gateway acked.
func TestConsoleActionRefusals(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	h := e.start(t)
	gw := newGateway(h, "gw1")
	gw.run(500)
	defer gw.halt()
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	epoch := func() uint64 {
		for _, p := range h.describe(t, "g").Partitions {
			if p.Partition == 1 {
				return p.Epoch
			}
		}
		t.Fatal("no partition 1")
		return 0
	}
	before := epoch()

	c := newConsoleClient(t, h)
	if a := c.login(e.adminToken, nil); a.status != 303 {
		t.Fatalf("login: %d", a.status)
	}
	csrf := c.csrf()
	// The wrong token differs from the right one in its last character
	// (replacing it with a fixed "A" left it right whenever it ended in A:
	// the test then failed 1 run in 64).
	wrong := csrf[:len(csrf)-1] + "A"
	if wrong == csrf {
		wrong = csrf[:len(csrf)-1] + "B"
	}
	revoke := "/v1/admin/groups/g/partitions/orders/1/revoke"
	body := coordinator.RevokeRequest{Reason: "console test"}
	for _, tc := range []struct {
		name         string
		csrf, origin string
		status       int
	}{
		{"no CSRF token", "", c.origin, 403},
		{"wrong CSRF token", wrong, c.origin, 403},
		{"another origin", csrf, "https://evil.example", 403},
		{"no origin, no referer", csrf, "", 403},
	} {
		if a := c.action("POST", revoke, tc.csrf, tc.origin, body); a.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, a.status, a.body, tc.status)
		}
	}
	session := c.cookies["capgate_console"]
	delete(c.cookies, "capgate_console")
	if a := c.action("POST", revoke, csrf, c.origin, body); a.status != 401 {
		t.Errorf("no session: %d, want 401", a.status)
	}
	c.cookies["capgate_console"] = session
	if a := c.action("POST", "/v1/admin/keys/rotate", csrf, c.origin, nil); a.status != 404 {
		t.Errorf("an admin route that is not a console action: %d, want 404", a.status)
	}
	if got := epoch(); got != before {
		t.Fatalf("refused requests moved the epoch %d → %d", before, got)
	}

	ok := c.action("POST", revoke, csrf, c.origin, body)
	var out coordinator.RevokeResponse
	if ok.status != 200 || json.Unmarshal([]byte(ok.body), &out) != nil || out.Epoch != before+1 {
		t.Fatalf("revoke through the console: %d %s, want 200 at epoch %d", ok.status, ok.body, before+1)
	}
	var seen bool
	gw.mu.Lock()
	defer gw.mu.Unlock()
	for _, r := range gw.replies {
		for _, f := range r.Fences {
			seen = seen || f.Partition == 1 && f.Epoch == out.Epoch
		}
	}
	if !seen {
		t.Fatal("the console's revoke answered before the gateway saw the fence")
	}
	// The audit log names the console and its operator as who made the revoke.
	var audit coordinator.AuditResponse
	h.call(t, "GET", "/v1/admin/audit", e.adminToken, nil, 200, &audit)
	if len(audit.Entries) == 0 || audit.Entries[0].Who != "console:admin" || audit.Entries[0].Action != "partition_revoke" || audit.Entries[0].Result != "ok" {
		t.Fatalf("audit after the console's revoke: %+v", audit.Entries)
	}
}

// TestConsoleStreamBounded: the live stream sends timeline events as SSE,
// resumes after Last-Event-ID, and refuses subscribers beyond the bound
// (another session's: one session past its share is 429, as
// TestConsoleStreamSharePerSession shows).
func TestConsoleStreamBounded(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	e.cfg.Console.MaxSubscribers = 1
	h := e.start(t)
	c := newConsoleClient(t, h)
	if a := c.login(e.adminToken, nil); a.status != 303 {
		t.Fatalf("login: %d", a.status)
	}
	req, _ := http.NewRequest("GET", h.base+"/console/events?after=0", nil)
	req.AddCookie(&http.Cookie{Name: "capgate_console", Value: c.cookies["capgate_console"]})
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	other := newConsoleClient(t, h)
	if a := other.login(e.adminToken, nil); a.status != 303 {
		t.Fatalf("second login: %d", a.status)
	}
	if a := other.send("GET", "/console/events?after=0", nil, nil); a.status != 503 || a.header.Get("Retry-After") == "" {
		t.Fatalf("another session's stream with max_subscribers 1: %d, want 503 with Retry-After", a.status)
	}
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	m := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	lines := bufio.NewScanner(resp.Body)
	deadline := time.AfterFunc(10*time.Second, func() { resp.Body.Close() })
	defer deadline.Stop()
	for lines.Scan() {
		data, ok := strings.CutPrefix(lines.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct{ Kind, Member string }
		if json.Unmarshal([]byte(data), &ev) == nil && ev.Kind == "join" && ev.Member == m.id {
			return
		}
	}
	t.Fatal("the stream never carried the join")
}
