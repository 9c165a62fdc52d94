package gateway

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// TestFirstLargeProduceDuringAForgedFlood (redteam20 #1): the check that
// decides a request's body cap from its headers (preauth.go) has no
// client address — fasthttp's HeaderReceived gets the headers alone — so
// its failed verifications share one budget. A stranger sending forged
// tokens on POSTs with large bodies (no token needed, no body sent)
// spends it, and then a producer's first produce over 4 KiB with a
// capability or client credential the gateway had not verified yet — a
// producer starting, a new admin grant, every producer after a gateway
// restart — was answered 413 body_too_large, which producers take as
// final, for as long as the flood went on. Now such a request's token is
// verified on its own client's budget when the body is refused, and a
// producer's is answered 429 rate_limited with Retry-After, the token
// verified and cached, so the same request sent again is served. The
// forger's own requests are still 413.
func TestFirstLargeProduceDuringAForgedFlood(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.AuthFailuresPerSecond, c.AuthFailureBurst = 0.001, 3 })
	big := `{"records":[{"value":"` + strings.Repeat("eHh4", 4<<10) + `"}]}` // 16 KiB of base64
	producer, _ := h.mint(withOps(capClaims(0), "fetch", "produce"))
	forged := producer[:len(producer)-4] + "AAAA"

	// The stranger floods from another address of its own.
	stranger := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext,
	}}
	flood := func() {
		for range 12 {
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, h.base+recordsURL(0), strings.NewReader(big))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+forged)
			req.Header.Set("Content-Type", "application/json")
			resp, err := stranger.Do(req)
			if err != nil {
				t.Fatalf("forged produce: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("forged produce: %d, want 413 (never served, never asked to retry)", resp.StatusCode)
			}
		}
	}

	// A capability with produce, never seen by this gateway.
	flood()
	produce := func(token string, p int32) response {
		return h.do(http.MethodPost, recordsURL(p), token, strings.NewReader(big), "Content-Type", "application/json")
	}
	r := produce(producer, 0)
	if r.status != http.StatusTooManyRequests || r.errorCode() != api.CodeRateLimited || r.header.Get("Retry-After") == "" {
		t.Fatalf("a fresh produce capability's first 16 KiB produce during a forged flood: %d %s, want 429 rate_limited with Retry-After (retriable)", r.status, r.body)
	}
	if r = produce(producer, 0); r.status != http.StatusOK {
		t.Fatalf("the same produce sent again: %d %s, want 200", r.status, r.body)
	}

	// A client credential that may produce, never seen by this gateway.
	flood()
	cred, _ := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, time.Now(), time.Hour)
	if r = produce(cred, 1); r.status != http.StatusTooManyRequests || r.errorCode() != api.CodeRateLimited {
		t.Fatalf("a fresh producing credential's first 16 KiB produce during a forged flood: %d %s, want 429 rate_limited", r.status, r.body)
	}
	if r = produce(cred, 1); r.status != http.StatusOK {
		t.Fatalf("the credential's produce sent again: %d %s, want 200", r.status, r.body)
	}

	// curl sends "Expect: 100-continue" before a body over 1 KiB: the
	// head alone is answered, 429 too, and the body is never asked for.
	flood()
	another, _ := h.mint(withOps(capClaims(3), "fetch", "produce"))
	r = rawExchange(t, h.gw.Addr(), "POST "+recordsURL(3)+" HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer "+another+
		"\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: "+strconv.Itoa(len(big))+"\r\n\r\n")
	if r.status != http.StatusTooManyRequests || r.errorCode() != api.CodeRateLimited {
		t.Fatalf("a fresh produce capability's first produce with Expect: 100-continue during a forged flood: %d %s, want 429 rate_limited", r.status, r.body)
	}
	if r = produce(another, 3); r.status != http.StatusOK {
		t.Fatalf("that produce sent again: %d %s, want 200", r.status, r.body)
	}

	// A capability without produce still gets 413: only a producer is
	// told to send again.
	flood()
	fetchOnly, _ := h.mint(capClaims(2))
	r = produce(fetchOnly, 2)
	expectError(t, r, http.StatusRequestEntityTooLarge, api.CodeBodyTooLarge)
}
