package gateway

import (
	"bufio"
	"bytes"
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
)

// TestUnauthenticatedBodiesAreNotHeld: a request body is read only up to
// preauthBodyBytes unless the request bears a valid capability with the
// produce op — decided from the headers, before the body is read. Many
// connections each announcing a max_body_bytes body without one are
// answered 413 at once (not held until read_timeout) and the gateway
// allocates nothing like their announced bodies (fasthttp allocates a
// Content-Length body whole before reading it).
func TestUnauthenticatedBodiesAreNotHeld(t *testing.T) {
	h := newHarness(t, nil)
	fetchOnly, _ := h.mint(capClaims(0))
	producer, _ := h.mint(withOps(capClaims(0), "fetch", "produce"))
	announce := h.gw.cfg.MaxBodyBytes
	head := func(auth, framing string) string {
		return "POST " + recordsURL(0) + " HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n" + auth + framing + "\r\n"
	}
	kinds := []string{
		head("", fmt.Sprintf("Content-Length: %d\r\n", announce)),
		head("Authorization: Bearer not-a-token\r\n", fmt.Sprintf("Content-Length: %d\r\n", announce)),
		head("Authorization: Bearer "+fetchOnly+"\r\n", fmt.Sprintf("Content-Length: %d\r\n", announce)),
		head("", "Transfer-Encoding: chunked\r\n") + fmt.Sprintf("%x\r\n", announce-16),
		"GET " + recordsPath(0, "offset=0") + " HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + fetchOnly +
			fmt.Sprintf("\r\nContent-Length: %d\r\n\r\n", announce),
	}
	const conns = 40
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	answers := make([]string, conns)
	for i := range conns {
		wg.Go(func() { answers[i] = sendHeadAndRead(h.gw.Addr(), kinds[i%len(kinds)]+strings.Repeat("x", 1024)) })
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
	// An authenticated produce keeps max_body_bytes.
	value := strings.Repeat("QUJD", 16<<10) // 64 KiB of base64
	r := h.do(http.MethodPost, recordsURL(0), producer, strings.NewReader(`{"records":[{"value":"`+value+`"}]}`), "Content-Type", "application/json")
	if r.status != http.StatusOK {
		t.Fatalf("64 KiB produce with a produce capability: %d %s", r.status, r.body)
	}
	// A small body without a token is still read and answered 401.
	r = h.do(http.MethodPost, recordsURL(0), "", strings.NewReader(`{"records":[{"value":"QUJD"}]}`), "Content-Type", "application/json")
	expectError(t, r, http.StatusUnauthorized, api.CodeUnauthorized)
	// And one over the cap says what to do.
	r = h.do(http.MethodPost, recordsURL(0), "", bytes.NewReader(make([]byte, 64<<10)), "Content-Type", "application/json")
	expectError(t, r, http.StatusRequestEntityTooLarge, api.CodeBodyTooLarge)
	if !strings.Contains(string(r.body), "produce") {
		t.Errorf("413 before authentication does not say what allows a larger body: %s", r.body)
	}
}

// sendHeadAndRead writes raw (a request's head and the start of its
// body) and returns the status line's code and reason and the body of
// the answer, or the error reading it; the rest of the body is never sent.
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

// TestUnsyncedGatewayAnswersLargeBodiesNotReady: before its first sync a
// gateway cannot verify any capability, so every body over the small cap
// would be 413 — final to a producer, which must retry (503 not_ready,
// Retry-After) as it does for small ones.
func TestUnsyncedGatewayAnswersLargeBodiesNotReady(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{beforeStart: func(h *harness) { h.sync.setFailing(true) }})
	producer, _ := h.mint(withOps(capClaims(0), "produce"))
	value := strings.Repeat("QUJD", 16<<10)
	r := h.do(http.MethodPost, recordsURL(0), producer, strings.NewReader(`{"records":[{"value":"`+value+`"}]}`), "Content-Type", "application/json")
	expectError(t, r, http.StatusServiceUnavailable, api.CodeNotReady)
	if r.header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	r = h.do(http.MethodPost, recordsURL(0), producer, strings.NewReader(`{"records":[{"value":"QUJD"}]}`), "Content-Type", "application/json")
	expectError(t, r, http.StatusServiceUnavailable, api.CodeNotReady)
}
