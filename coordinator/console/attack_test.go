package console

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/coordinator/timeline"
	"github.com/capgate/capgate/tlsconf"
)

// serveOnSocket serves b's console on a real TCP socket and returns its
// address.
func serveOnSocket(t *testing.T, b *browserDouble) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { b.c.Serve(ctx) }}
	go srv.Serve(ln) //nolint:errcheck // ends with Shutdown
	t.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}

// openStream opens GET /console/events with cookie over addr and reads
// the stream's first line; the caller reads on.
func openStream(t *testing.T, addr, cookie string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_, err = io.WriteString(conn, "GET /console/events?after=0 HTTP/1.1\r\nHost: console.test\r\nConnection: close\r\n"+
		"Cookie: "+sessionCookie+"="+cookie+"\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	// A bound, not a wait: without the fix the stream runs for a minute.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	status, err := r.ReadString('\n')
	if err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("stream: %q %v", status, err)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream before its first event: %v", err)
		}
		if strings.Contains(line, "retry: ") {
			return conn, r
		}
	}
}

// TestLogoutEndsLiveStreams: a logged-out (or re-logged-in) session's
// event stream ends at once. It ran on for up to a minute after logout
// (streamFor), still carrying every group's timeline to whoever held the
// cookie: logout ended the session for new requests only.
func TestLogoutEndsLiveStreams(t *testing.T) {
	b := newTestConsole(t, stubBackend{"GET /v1/admin/groups": `{"groups":[]}`}, time.Now)
	addr := serveOnSocket(t, b)
	b.login()
	_, stream := openStream(t, addr, b.cookies[sessionCookie])
	page := b.do("GET", "/console/groups", "")
	m := loginNonce.FindSubmatch(page.Body())
	if m == nil {
		t.Fatalf("groups page without the csrf field: %d", page.StatusCode())
	}
	if r := b.do("POST", "/console/logout", url.Values{"csrf": {string(m[1])}}.Encode()); r.StatusCode() != fasthttp.StatusSeeOther {
		t.Fatalf("logout: %d", r.StatusCode())
	}
	rest, err := io.ReadAll(stream)
	if err != nil {
		t.Fatalf("the stream of a logged-out session is still open: %v (read %q)", err, rest)
	}
}

// TestLoginEndsThePreviousSession: logging in again from a browser that
// holds a session ends the old one; it stayed valid until session_ttl, a
// working id the browser no longer knows of.
func TestLoginEndsThePreviousSession(t *testing.T) {
	b := newTestConsole(t, stubBackend{"GET /v1/admin/groups": `{"groups":[]}`}, time.Now)
	b.login()
	old := b.cookies[sessionCookie]
	b.login() // sends the old cookie along, as a browser does
	if b.cookies[sessionCookie] == old {
		t.Fatal("login kept the session id the browser came with")
	}
	b.cookies[sessionCookie] = old
	if r := b.do("GET", "/console/groups", ""); r.StatusCode() != fasthttp.StatusSeeOther {
		t.Fatalf("the session before the second login: %d, want 303 to the login page", r.StatusCode())
	}
}

// The stub IdP operator's token expires at idpTokenExpiry; stubDenied is
// whether an admin has denied her identity since.
var (
	idpTokenExpiry = time.Date(2030, 1, 1, 0, 30, 0, 0, time.UTC)
	stubDenied     atomic.Bool
)

// TestIdPSessionEndsWithItsToken: an IdP login's session ends at the
// token's exp, before session_ttl, and as soon as its identity is denied.
func TestIdPSessionEndsWithItsToken(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	backend := stubBackend{"GET /v1/admin/groups": `{"groups":[]}`}
	b := newTestConsole(t, backend, func() time.Time { return now })
	b.loginWith("an-idp-operator")
	if r := b.do("GET", "/console/groups", ""); r.StatusCode() != 200 || !strings.Contains(string(r.Body()), "idp:operator") {
		t.Fatalf("groups as the IdP operator: %d", r.StatusCode())
	}
	now = idpTokenExpiry
	if r := b.do("GET", "/console/groups", ""); r.StatusCode() != fasthttp.StatusSeeOther {
		t.Fatalf("groups at the token's exp (session_ttl not reached): %d, want 303 to the login page", r.StatusCode())
	}

	now = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	t.Cleanup(func() { stubDenied.Store(false) })
	b.loginWith("an-idp-operator")
	stubDenied.Store(true)
	if r := b.do("GET", "/console/groups/g/live", ""); r.StatusCode() != fasthttp.StatusUnauthorized {
		t.Fatalf("a fragment after the identity was denied: %d, want 401", r.StatusCode())
	}
	stubDenied.Store(false) // the deny expired: the session stays ended
	if r := b.do("GET", "/console/groups", ""); r.StatusCode() != fasthttp.StatusSeeOther {
		t.Fatalf("groups after a deny came and went: %d, want 303 to the login page", r.StatusCode())
	}
}

// TestCookiesSecureOverTLS: over TLS both the login token's cookie and the
// session cookie are Secure (a browser never sends them in clear text),
// and the login works with the https origin.
func TestCookiesSecureOverTLS(t *testing.T) {
	b := newTestConsole(t, stubBackend{"GET /v1/admin/groups": `{"groups":[]}`}, time.Now)
	ca, err := tlsconf.NewCA("console-test", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue("127.0.0.1", []string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { b.c.Serve(ctx) }}
	go srv.ServeTLSEmbed(ln, leaf.CertPEM, leaf.KeyPEM) //nolint:errcheck // ends with Shutdown
	t.Cleanup(func() { _ = srv.Shutdown() })
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	client := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	base := "https://" + ln.Addr().String()

	page, err := client.Get(base + "/console/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	m := loginNonce.FindSubmatch(body)
	if m == nil || !secureCookie(page, loginCookie) {
		t.Fatalf("login page over TLS: %d, login cookie %q", page.StatusCode, page.Header.Values("Set-Cookie"))
	}
	req, _ := http.NewRequest("POST", base+"/console/login", strings.NewReader(url.Values{"token": {"the-admin-token"}, "csrf": {string(m[1])}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	req.AddCookie(&http.Cookie{Name: loginCookie, Value: string(m[1])})
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !secureCookie(resp, sessionCookie) {
		t.Fatalf("login over TLS: %d, cookies %q", resp.StatusCode, resp.Header.Values("Set-Cookie"))
	}
}

// secureCookie reports whether resp sets cookie name Secure, HttpOnly and
// SameSite=Strict under /console.
func secureCookie(resp *http.Response, name string) bool {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c.Secure && c.HttpOnly && c.SameSite == http.SameSiteStrictMode && c.Path == Prefix
		}
	}
	return false
}

// countingBackend is stubBackend counting Admin calls.
type countingBackend struct {
	stubBackend
	calls *atomic.Int64
}

func (c countingBackend) Admin(who, method, path string, body []byte) (int, []byte) {
	c.calls.Add(1)
	return c.stubBackend.Admin(who, method, path, body)
}

// TestEveryRouteNeedsASession: every console route but the login page,
// the login itself and the static files refuses a request without a
// session (a page: 303 to the login page; anything else: 401), and every
// state-changing route also refuses a session without its CSRF token or
// from another origin (403) — all before the admin API is asked anything.
// Routes are read from the table, so a route added later is checked too.
func TestEveryRouteNeedsASession(t *testing.T) {
	public := map[string]bool{"console_static": true, "console_login_page": true, "console_login": true}
	calls := new(atomic.Int64)
	backend := countingBackend{stubBackend{"GET /v1/admin/groups": `{"groups":[]}`}, calls}
	c, err := New(DefaultConfig(), backend, timeline.New(64, 2), zap.NewNop(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	b := &browserDouble{t: t, c: c, cookies: map[string]string{}}
	for _, rt := range c.table {
		if public[rt.name] {
			continue
		}
		uri := "/console/" + strings.ReplaceAll(strings.Join(rt.pattern, "/"), "{}", "g")
		uri = strings.ReplaceAll(uri, "*", "groups/g/partitions/t/0/revoke")
		want := fasthttp.StatusUnauthorized
		if rt.access == page {
			want = fasthttp.StatusSeeOther
		}
		if r := b.do(rt.method, uri, "csrf=x"); r.StatusCode() != want {
			t.Errorf("%s %s without a session: %d, want %d", rt.method, uri, r.StatusCode(), want)
		}
	}
	b.login()
	csrf := ""
	if m := loginNonce.FindSubmatch(b.do("GET", "/console/groups", "").Body()); m != nil {
		csrf = string(m[1])
	}
	for _, rt := range c.table {
		if rt.access != change {
			continue
		}
		uri := "/console/" + strings.ReplaceAll(strings.Join(rt.pattern, "/"), "*", "groups/g/partitions/t/0/revoke")
		if r := b.do(rt.method, uri, "csrf=forged"); r.StatusCode() != fasthttp.StatusForbidden {
			t.Errorf("%s %s with a forged CSRF token: %d, want 403", rt.method, uri, r.StatusCode())
		}
		other := b.with("Origin", "http://evil.test")
		if r := other.do(rt.method, uri, "csrf="+csrf); r.StatusCode() != fasthttp.StatusForbidden {
			t.Errorf("%s %s from another origin: %d, want 403", rt.method, uri, r.StatusCode())
		}
	}
	if n := calls.Load(); n != 1 { // the one groups page read after login
		t.Fatalf("the admin API was asked %d times, want 1 (the groups page)", n)
	}
}
