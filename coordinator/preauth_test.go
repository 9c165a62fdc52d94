package coordinator_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestUnauthenticatedBodiesAreNotHeld: a request body is read only up to
// a small cap unless its bearer is a token the coordinator knows — decided
// from the headers, before the body is read. Many connections each
// announcing a max_body_bytes body without one are answered 413 at once
// (not held until read_timeout) and the coordinator allocates nothing
// like their announced bodies; an authenticated join keeps max_body_bytes
// and the console's login form (token in the body) still logs in.
func TestUnauthenticatedBodiesAreNotHeld(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.MaxBodyBytes = 4 << 20
	h := e.start(t)
	cred := h.clientCredential(t, []string{"g"}, []string{"orders"})
	announce := e.cfg.MaxBodyBytes
	cl := fmt.Sprintf("Content-Length: %d\r\n", announce)
	head := func(line, extra string) string {
		return line + " HTTP/1.1\r\nHost: c\r\nContent-Type: application/json\r\n" + extra + "\r\n"
	}
	kinds := []string{
		head("POST /v1/groups/g/join", cl),
		head("POST /v1/groups/g/join", "Authorization: Bearer eyJhbGciOiJFZERTQSJ9.e30.c2ln\r\n"+cl),
		head("POST /v1/admin/clients", "Authorization: Bearer not-the-admin-token\r\n"+cl),
		head("POST /console/login", cl),
		head("POST /oauth/token", "Authorization: Basic Zm9vOmJhcg==\r\n"+cl),
		head("POST /v1/groups/g/commit", "Transfer-Encoding: chunked\r\n") + fmt.Sprintf("%x\r\n", announce-16),
		head("GET /v1/sync?gateway=x&after=0", "Authorization: Bearer "+cred+"\r\n"+cl),
	}
	const conns = 42
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	answers := make([]string, conns)
	for i := range conns {
		wg.Go(func() {
			answers[i] = sendHeadAndRead(h.c.Addr().String(), kinds[i%len(kinds)]+strings.Repeat("x", 1024))
		})
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	for i, a := range answers {
		if !strings.HasPrefix(a, "413 ") || !strings.Contains(a, `"code":"`+string(api.CodeBodyTooLarge)+`"`) {
			t.Errorf("connection %d (kind %d): %q, want an answer 413 body_too_large before the body came", i, i%len(kinds), a)
		}
	}
	if got, bound := after.TotalAlloc-before.TotalAlloc, uint64(conns*announce/8); got > bound {
		t.Errorf("allocated %d bytes for %d unauthenticated requests announcing %d bytes each, want < %d", got, conns, announce, bound)
	}
	// A client credential's join keeps max_body_bytes.
	topics := make([]string, 400)
	for i := range topics {
		topics[i] = fmt.Sprintf("topic-with-a-rather-long-name-%03d", i)
	}
	topics[0] = "orders"
	status, body, _ := h.do(t, "POST", "/v1/groups/g/join", cred, api.JoinRequest{Topics: topics})
	if status == http.StatusRequestEntityTooLarge {
		t.Fatalf("authenticated 14 KB join: %d %s", status, body)
	}
	// The console's login form carries its token in the body.
	c := newConsoleClient(t, h)
	if a := c.login(strings.Repeat("A", 15<<10), nil); a.status != http.StatusUnauthorized {
		t.Fatalf("console login with a 15 KiB wrong token: %d, want 401", a.status)
	}
	if a := c.login(e.adminToken, nil); a.status != http.StatusSeeOther {
		t.Fatalf("console login: %d %s", a.status, a.body)
	}
	// Without a token, a body over the cap says what allows more.
	status, body, _ = h.do(t, "POST", "/v1/groups/g/join", "", api.JoinRequest{Topics: topics})
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "bearer") {
		t.Fatalf("unauthenticated 14 KB join: %d %s, want 413 naming the bearer", status, body)
	}
}

// sendHeadAndRead writes raw (a request's head and the start of its
// body) and returns the status and body of the answer, or the error
// reading it; the rest of the body is never sent.
func sendHeadAndRead(addr, raw string) string {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err.Error()
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		return err.Error()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.Status + " " + string(b)
}

// TestRepeatedAuthorizationRefused: a request with two Authorization
// headers is 400 — the coordinator read the first, while a proxy in front
// may have checked the other.
func TestRepeatedAuthorizationRefused(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	for _, order := range [][2]string{{e.adminToken, "x"}, {"x", e.adminToken}} {
		raw := "GET /v1/admin/groups HTTP/1.1\r\nHost: c\r\nAuthorization: Bearer " + order[0] + "\r\nauthorization: Bearer " + order[1] + "\r\n\r\n"
		if a := sendHeadAndRead(h.c.Addr().String(), raw); !strings.HasPrefix(a, "400 ") || !strings.Contains(a, `"bad_request"`) {
			t.Errorf("two Authorization headers: %q, want 400 bad_request", a)
		}
	}
}

// TestStandbyAnswersLargeBodiesNotLeader: a standby replica reads only
// small bodies (it serves no request that needs one), so a large request
// there — a member's commit of many offsets — must still get 421
// not_leader naming the leader, which the client follows, not a 413 it
// takes as final.
func TestStandbyAnswersLargeBodiesNotLeader(t *testing.T) {
	s, _, standby, leaderURL := startLeaderAndStandby(t)
	big := map[string]any{"offsets": []map[string]any{{"topic": "orders", "partition": 0, "offset": 1, "metadata": strings.Repeat("m", 16<<10)}}}
	status, body, header := s.harness(standby).do(t, "POST", "/v1/groups/g/commit", "x", big)
	if status != http.StatusMisdirectedRequest || header.Get(api.HeaderLeader) != leaderURL {
		t.Fatalf("16 KiB commit at the standby: %d %s, want 421 not_leader naming %s", status, body, leaderURL)
	}
}

// TestBodyLimitByRoute: which requests get max_body_bytes before their
// body is read. With tls.admin.auth certificate (the certificate is not
// known at header time) admin routes keep it — but not a path that dot
// segments or escapes lead from /v1/admin/ to another route.
func TestBodyLimitByRoute(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	cred := h.clientCredential(t, []string{"g"}, []string{"orders"})
	full, small := e.cfg.MaxBodyBytes, 4<<10
	for _, c := range []struct {
		method, uri, auth string
		byCert            bool
		want              int
	}{
		{"POST", "/v1/groups/g/join", "", false, small},
		{"POST", "/v1/groups/g/join", "Bearer " + cred, false, full},
		{"POST", "/v1/groups/g/join", "bearer " + cred, false, full},
		{"GET", "/v1/groups/g/offsets", "Bearer " + cred, false, small},
		{"POST", "/v1/admin/clients", "Bearer " + e.adminToken, false, full},
		{"POST", "/v1/admin/clients", "Bearer not-it", false, small},
		{"POST", "/v1/admin/clients", "", false, small},
		{"PUT", "/v1/admin/qos", "", true, full},
		{"POST", "/v1/admin/../groups/g/join", "", true, small},
		{"POST", "/v1/admin/%2e%2e/groups/g/join", "", true, small},
		{"POST", "/console/login", "", false, 20 << 10},
		{"DELETE", "/v1/admin/groups/g", "Bearer " + e.adminToken, false, small},
	} {
		if got := coordinator.BodyLimitOf(h.c, c.method, c.uri, c.auth, c.byCert); got != c.want {
			t.Errorf("%s %s (auth %.12q, admin by certificate %v): body cap %d, want %d", c.method, c.uri, c.auth, c.byCert, got, c.want)
		}
	}
}

// TestFramedBothWaysRefused: a request with both Content-Length and
// Transfer-Encoding (a request-smuggling shape, RFC 9112 §6.3) is 400, as
// at the gateway; the coordinator read it as chunked and served it.
func TestFramedBothWaysRefused(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	raw := "POST /v1/admin/keys/rotate HTTP/1.1\r\nHost: c\r\nAuthorization: Bearer " + e.adminToken +
		"\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
	if a := sendHeadAndRead(h.c.Addr().String(), raw); !strings.HasPrefix(a, "400 ") || !strings.Contains(a, `"bad_request"`) {
		t.Errorf("Content-Length with Transfer-Encoding: %q, want 400 bad_request", a)
	}
}
