package console

import (
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/coordinator/timeline"
	"github.com/capgate/capgate/internal/failguard"
)

// stubBackend is a coordinator double for this package's tests: canned
// admin answers by "METHOD path".
type stubBackend map[string]string

func (s stubBackend) Admin(_, method, path string, _ []byte) (int, []byte) {
	if body, ok := s[method+" "+path]; ok {
		return fasthttp.StatusOK, []byte(body)
	}
	if bare, query, _ := strings.Cut(path, "?"); query == "summaries=true&limit=101" {
		if body, ok := s[method+" "+bare]; ok { // the groups page's read of an empty list
			return fasthttp.StatusOK, []byte(body)
		}
	}
	return fasthttp.StatusNotFound, []byte(`{"error":{"code":"not_found","message":"no such route"}}`)
}
func (s stubBackend) IsAdminToken(token []byte) bool             { return string(token) == "the-admin-token" }
func (s stubBackend) ListPageMax() int                           { return 10_000 }
func (s stubBackend) AdminCertificate(*fasthttp.RequestCtx) bool { return true }
func (s stubBackend) IdentityAdmin(token []byte) (string, time.Time, func() bool, error) {
	if string(token) == "an-idp-operator" {
		return "idp:operator", idpTokenExpiry, stubDenied.Load, nil
	}
	return "", time.Time{}, nil, ErrNotIdentityToken
}
func (s stubBackend) Serves(method, path string) bool { _, ok := s[method+" "+path]; return ok }
func (s stubBackend) ClientAddr(ctx *fasthttp.RequestCtx) netip.Addr {
	return failguard.Addr(ctx.RemoteAddr()).Unmap()
}

// browserDouble sends requests straight into Console.Serve, keeping
// cookies.
type browserDouble struct {
	t       *testing.T
	c       *Console
	cookies map[string]string
	headers map[string]string // set last: override the defaults
}

// with returns a double sharing b's cookies that also sends header k: v.
func (b *browserDouble) with(k, v string) *browserDouble {
	return &browserDouble{t: b.t, c: b.c, cookies: b.cookies, headers: map[string]string{k: v}}
}

func (b *browserDouble) do(method, uri, form string) *fasthttp.Response {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI("http://console.test" + uri)
	req.Header.Set("Origin", "http://console.test")
	for k, v := range b.headers {
		req.Header.Set(k, v)
	}
	if form != "" {
		req.Header.SetContentType("application/x-www-form-urlencoded")
		req.SetBodyString(form)
	}
	for k, v := range b.cookies {
		req.Header.SetCookie(k, v)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, nil)
	b.c.Serve(&ctx)
	var resp fasthttp.Response
	ctx.Response.CopyTo(&resp)
	resp.Header.VisitAllCookie(func(key, value []byte) {
		var ck fasthttp.Cookie
		_ = ck.ParseBytes(value)
		if len(ck.Value()) == 0 {
			delete(b.cookies, string(key))
		} else {
			b.cookies[string(key)] = string(ck.Value())
		}
	})
	return &resp
}

var loginNonce = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *browserDouble) login() { b.t.Helper(); b.loginWith("the-admin-token") }

func (b *browserDouble) loginWith(token string) {
	b.t.Helper()
	page := b.do("GET", "/console/login", "")
	m := loginNonce.FindSubmatch(page.Body())
	if m == nil {
		b.t.Fatalf("login page: %d", page.StatusCode())
	}
	form := url.Values{"token": {token}, "csrf": {string(m[1])}}.Encode()
	if r := b.do("POST", "/console/login", form); r.StatusCode() != fasthttp.StatusSeeOther || b.cookies[sessionCookie] == "" {
		b.t.Fatalf("login: %d", r.StatusCode())
	}
}

func newTestConsole(t *testing.T, backend stubBackend, now func() time.Time) *browserDouble {
	c, err := New(DefaultConfig(), backend, timeline.New(64, 2), zap.NewNop(), now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &browserDouble{t: t, c: c, cookies: map[string]string{}}
}

// TestAuditViewWhenPresent: once the coordinator serves GET
// /v1/admin/audit, the console links it and shows its entries.
func TestAuditViewWhenPresent(t *testing.T) {
	b := newTestConsole(t, stubBackend{
		"GET /v1/admin/groups": `{"groups":[]}`,
		"GET /v1/admin/audit":  `{"entries":[{"at":"2030-01-01T00:00:00Z","who":"console","action":"revoke_partition","reason":"drill","result":"ok"}]}`,
	}, time.Now)
	b.login()
	if page := b.do("GET", "/console/groups", ""); !strings.Contains(string(page.Body()), `href="/console/audit"`) {
		t.Fatalf("groups page without the audit link: %d", page.StatusCode())
	}
	page := b.do("GET", "/console/audit", "")
	body := string(page.Body())
	if page.StatusCode() != 200 || !strings.Contains(body, "<th>at</th><th>who</th><th>action</th><th>reason</th><th>result</th>") ||
		!strings.Contains(body, "<td>revoke_partition</td>") {
		t.Fatalf("audit page: %d\n%s", page.StatusCode(), body)
	}
}

// TestSessionExpires: a session ends at session_ttl (by the injected
// clock): pages send the browser to the login page, data routes answer 401.
func TestSessionExpires(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newTestConsole(t, stubBackend{"GET /v1/admin/groups": `{"groups":[]}`}, func() time.Time { return now })
	b.login()
	if r := b.do("GET", "/console/groups", ""); r.StatusCode() != 200 {
		t.Fatalf("groups within the session: %d", r.StatusCode())
	}
	now = now.Add(DefaultConfig().SessionTTL)
	if r := b.do("GET", "/console/groups", ""); r.StatusCode() != fasthttp.StatusSeeOther {
		t.Fatalf("groups after session_ttl: %d, want 303 to the login page", r.StatusCode())
	}
	if r := b.do("GET", "/console/events?after=0", ""); r.StatusCode() != fasthttp.StatusUnauthorized {
		t.Fatalf("events after session_ttl: %d, want 401", r.StatusCode())
	}
}

// TestGatewaysPageSaysWhatSilenceMeans: the gateways page explains a
// silent gateway by groups.silent_gateways, which the admin API reports.
// With "serve" a silent gateway keeps serving and is never counted safe;
// the page said it was (it had one sentence, true only for "fence").
func TestGatewaysPageSaysWhatSilenceMeans(t *testing.T) {
	for _, c := range []struct{ mode, want, not string }{
		{"fence", "counts as safe for every fence", "never counts as safe"},
		{"serve", "never counts as safe", "counts as safe for every fence"},
	} {
		b := newTestConsole(t, stubBackend{
			"GET /v1/admin/groups":   `{"groups":[]}`,
			"GET /v1/admin/gateways": `{"seq":7,"silent_gateways":"` + c.mode + `","gateways":[{"id":"gw-1","acked_seq":7,"lag":0,"last_seen":"2030-01-01T00:00:00Z","silent":true}]}`,
		}, time.Now)
		b.login()
		page := b.do("GET", "/console/gateways", "")
		body := string(page.Body())
		if page.StatusCode() != 200 || !strings.Contains(body, c.want) || strings.Contains(body, c.not) ||
			!strings.Contains(body, `data-gateway="gw-1"`) {
			t.Errorf("%s: %d, want %q and not %q\n%s", c.mode, page.StatusCode(), c.want, c.not, body)
		}
	}
}
