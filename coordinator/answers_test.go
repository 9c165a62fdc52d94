package coordinator_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
	"github.com/capgate/capgate/internal/answerheld/answerheldtest"
	"github.com/capgate/capgate/internal/scrape"
)

// unreadAnswer sends a GET of path with token (none: "") and leaves its
// answer unread past the status line until close or the test's end.
func unreadAnswer(t *testing.T, h *harness, path, token string) (close func()) {
	t.Helper()
	authorization := ""
	if token != "" {
		authorization = "Authorization: Bearer " + token + "\r\n"
	}
	_, close = answerheldtest.Unread(t, strings.TrimPrefix(h.base, "http://"), fmt.Sprintf("GET %s HTTP/1.1\r\nHost: c\r\n%s\r\n", path, authorization))
	return close
}

// TestSlowReadersHoldBoundedAnswerBytes is the attack of a tenant
// reading large answers (describes, committed offsets, a member's
// offsets, listings) through connections that read slowly: the read
// place and the rate are given back when the handler returns, before the
// answer is written, so nothing bounded the answers waiting for their
// readers but the rate (~20 MB a second of answers at the defaults, held
// up to write_timeout). Now a tenant's answers not yet read are bounded
// (max_answer_bytes_held_per_tenant: A's second read of its 2,000
// partitions' offsets, while the first is unread, is 429 naming the
// bound), and in all (max_answer_bytes_held: B's large read 503
// overloaded while A holds the total); B's small reads and A's member's
// heartbeat are served; once A's reader goes, the bytes are given back
// and A reads again. Fails without (A's second read 200).
func TestSlowReadersHoldBoundedAnswerBytes(t *testing.T) {
	e := newEnv(t, map[string]int32{"big": 2000, "small": 1})
	e.cfg.MaxAnswerBytesHeldPerTenant, e.cfg.MaxAnswerBytesHeld = 32<<10, 64<<10
	e.cfg.WriteTimeout = 2 * time.Minute // the reader, not the clock, ends the hold
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := e.start(t, coordinator.WithListener(answerheldtest.SmallSendBuffers{Listener: ln}))
	credA := h.clientCredential(t, []string{"ga"}, []string{"big"})
	a := h.join(t, "ga", credA, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"big"}})
	credB := h.clientCredential(t, []string{"gb", "gb-small"}, []string{"big", "small"})
	h.join(t, "gb", credB, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"big"}})
	h.join(t, "gb-small", credB, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"small"}})

	closeA := unreadAnswer(t, h, "/v1/groups/ga", credA)
	// Its status line read, the answer is counted: holdAnswer ran before
	// fasthttp wrote a byte of it.
	status, body, header, err := h.try("GET", "/v1/groups/ga", credA, nil)
	if err != nil || status != http.StatusTooManyRequests || limitOf(body) != "coordinator.max_answer_bytes_held_per_tenant" || header.Get("Retry-After") == "" {
		t.Fatalf("A's second describe with its first unread: %v %d %.300s (Retry-After %q), want 429 naming coordinator.max_answer_bytes_held_per_tenant",
			err, status, body, header.Get("Retry-After"))
	}
	if n := coordinator.AnswerBytesHeld(h.c); n < 32<<10 {
		t.Fatalf("A's unread answer: %d bytes held", n)
	}
	status, body, header, err = h.try("GET", "/v1/groups/gb", credB, nil)
	if err != nil || status != http.StatusServiceUnavailable || errorCode(t, body) != api.CodeOverloaded || header.Get("Retry-After") == "" {
		t.Fatalf("B's large read while A holds max_answer_bytes_held: %v %d %.300s, want 503 overloaded", err, status, body)
	}
	if status, body, _, err := h.try("GET", "/v1/groups/gb-small", credB, nil); err != nil || status != http.StatusOK {
		t.Fatalf("B's small read beside A: %v %d %.300s", err, status, body)
	}
	a.heartbeat(t, 0) // a request that changes state is never refused for it

	closeA()
	eventually(t, func() string {
		if n := coordinator.AnswerBytesHeld(h.c); n != 0 {
			return fmt.Sprintf("A's reader gone: %d bytes still held", n)
		}
		return ""
	})
	for group, credential := range map[string]string{"ga": credA, "gb": credB} {
		if status, body, _, err := h.try("GET", "/v1/groups/"+group, credential, nil); err != nil || status != http.StatusOK || len(body) < 32<<10 {
			t.Fatalf("describe of %s once nothing is held: %v %d (%d bytes)", group, err, status, len(body))
		}
	}
	eventually(t, func() string {
		if n := coordinator.AnswerBytesHeld(h.c); n != 0 {
			return fmt.Sprintf("answers read whole: %d bytes still held", n)
		}
		return ""
	})
}

// TestUnreadOpenAPIAnswersShareOneCopy is the same attack by anyone: GET
// /openapi.json needs no token and its answer is ~190 KB, copied into
// each connection's response, so connections that ask for it and read
// nothing made the coordinator hold ~190 KB each until write_timeout —
// max_connections_per_address (1,000): ~190 MB from one address, no
// credential. The document is now one slice handed to every answer
// uncopied: 48 unread answers add under half a copy each to the live heap.
// Fails without (~9 MB added).
func TestUnreadOpenAPIAnswersShareOneCopy(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.WriteTimeout = 2 * time.Minute
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := e.start(t, coordinator.WithListener(answerheldtest.SmallSendBuffers{Listener: ln}))
	document := len(api.OpenAPIJSON())
	unreadAnswer(t, h, "/openapi.json", "") // fasthttp's pools warmed by one
	const readers = 48
	before := answerheldtest.LiveHeap()
	for range readers {
		unreadAnswer(t, h, "/openapi.json", "")
	}
	// With the fix ~25 KB a connection (fasthttp's buffers), without it
	// ~225 KB.
	if grown := answerheldtest.LiveHeap() - before; grown > readers*int64(document)/2 {
		t.Fatalf("%d unread answers of the %d-byte document grew the live heap by %d bytes (%d each), want under half a copy each",
			readers, document, grown, grown/readers)
	}
}

// TestIdPTenantsAnswersCountOnce: an IdP identity's answers counted
// under its token's iss and sub, its members' under its identity (the
// tenant their requests count for everywhere else), so an IdP tenant
// reading through its token beside its members' answers held twice
// max_answer_bytes_held_per_tenant (redteam15's left). Now one key: with
// its member's resync (1,000 renewals) unread, the identity's describe
// is 429 naming the per-tenant cap. Fails without (200).
func TestIdPTenantsAnswersCountOnce(t *testing.T) {
	e := newEnv(t, map[string]int32{"big": 1000})
	idp := idptest.New(t, "RS256")
	e.cfg.OIDC.Issuers = []identity.IssuerConfig{{
		Issuer: idp.URL, CAFile: idp.CAFile, Audiences: []string{"capgate"},
		Rules: []identity.Rule{{Claim: "groups", Value: "kafka-big", Groups: []string{"ga"}, Topics: []string{"big"}}},
	}}
	e.cfg.MaxAnswerBytesHeldPerTenant, e.cfg.MaxAnswerBytesHeld = 32<<10, 64<<20
	e.cfg.WriteTimeout = 2 * time.Minute // the reader, not the clock, ends the hold
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := e.start(t, coordinator.WithListener(answerheldtest.SmallSendBuffers{Listener: ln}))
	now := time.Now()
	token := idp.Token(idptest.Claims{"sub": "svc-7", "aud": "capgate", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "groups": []string{"kafka-big"}})
	e.remember(token)
	a := h.join(t, "ga", token, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"big"}})
	body := `{"wait_ms":0,"resync":true}`
	_, closeResync := answerheldtest.Unread(t, strings.TrimPrefix(h.base, "http://"), fmt.Sprintf(
		"POST /v1/groups/ga/heartbeat HTTP/1.1\r\nHost: c\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		a.token, len(body), body))
	defer closeResync()
	status, answer, _, err := h.try("GET", "/v1/groups/ga", token, nil)
	if err != nil || status != http.StatusTooManyRequests || limitOf(answer) != "coordinator.max_answer_bytes_held_per_tenant" {
		t.Fatalf("the IdP tenant's describe with its member's resync unread: %v %d %.300s, want 429 naming coordinator.max_answer_bytes_held_per_tenant",
			err, status, answer)
	}
}

// TestUnreadMetricsAnswersShareRenders: GET /metrics answers anyone, and
// each request gathered the registry (the process's descriptors read
// from /proc, the event loop asked for its gateways) and held its own
// ~25 KB copy until its reader took it — write_timeout for a connection
// that never reads: 1,000 connections per address ~25 MB of answers, no
// credential (redteam16). Now renders are shared by the requests that
// arrive before one begins and begin at most every scrape.Gap, so 48
// connections asking at once and reading nothing get at most a render
// per Gap of the time they took. Fails without (a render each).
func TestUnreadMetricsAnswersShareRenders(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.WriteTimeout = 2 * time.Minute
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := e.start(t, coordinator.WithListener(answerheldtest.SmallSendBuffers{Listener: ln}))
	addr := strings.TrimPrefix(h.base, "http://")
	const readers = 48
	before := coordinator.MetricsRenders(h.c)
	start := time.Now()
	statuses := make(chan string, readers)
	for range readers {
		go func() {
			d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
				return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
			}}
			conn, err := d.Dial("tcp", addr)
			if err != nil {
				statuses <- err.Error()
				return
			}
			t.Cleanup(func() { conn.Close() })
			if _, err := io.WriteString(conn, "GET /metrics HTTP/1.1\r\nHost: c\r\n\r\n"); err != nil {
				statuses <- err.Error()
				return
			}
			line, err := bufio.NewReader(conn).ReadString('\n') // the status line; the rest stays unread
			if err != nil {
				line = err.Error()
			}
			statuses <- line
		}()
	}
	for range readers {
		if line := <-statuses; !strings.HasPrefix(line, "HTTP/1.1 200") {
			t.Fatalf("an unread /metrics answer: %q", line)
		}
	}
	elapsed := time.Since(start)
	renders := coordinator.MetricsRenders(h.c) - before
	if most := 2 + uint64(elapsed/scrape.Gap); renders > most {
		t.Fatalf("%d connections asking /metrics at once over %v: %d renders, want at most %d (one per %v)", readers, elapsed, renders, most, scrape.Gap)
	}
	t.Logf("%d unread answers over %v: %d renders", readers, elapsed, renders)
}
