package gateway

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// forged is token with its signature replaced: the real header (kid) and
// claims, so the gateway must check the signature to refuse it. i makes
// each forgery different (none can be answered from a cache).
func forged(token string, i int) string {
	head, _, _ := strings.Cut(token[strings.Index(token, ".")+1:], ".")
	first, _, _ := strings.Cut(token, ".")
	sig := make([]byte, ed25519.SignatureSize) // well-formed, so the check reaches the signature
	binary.BigEndian.PutUint64(sig, uint64(i)+1)
	return first + "." + head + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// clientFrom is an HTTP client whose connections leave from the loopback
// address ip (any 127.0.0.0/8 address reaches the gateway on 127.0.0.1).
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

func (h *harness) getFrom(cl *http.Client, token, path string) response {
	h.t.Helper()
	return h.getVia(cl, token, path) // proxyaddr_test.go
}

func counterValue(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestForgedCapabilitiesBudgetedPerAddress is the attack: a client sends
// capabilities with forged signatures (a real kid and claims), each a
// signature check for the gateway and never cached, to spend the CPU
// other holders' fetches need. Past auth_failure_burst failures its
// address is refused 429 rate_limited with Retry-After before any check —
// a fresh valid capability of a holder never verified from it too
// (one that was: TestNeighbourForgeriesDoNotLockOutAKnownHolder) — while a capability it had
// verified before still fetches (cache hits never ask the budget), and
// another address's fresh capability verifies as ever.
func TestForgedCapabilitiesBudgetedPerAddress(t *testing.T) {
	const burst = 5
	h := newHarness(t, func(c *Config) { c.AuthFailuresPerSecond, c.AuthFailureBurst = 0.01, burst })
	h.produce(0, 3)
	attacker, other := clientFrom("127.0.0.2"), clientFrom("127.0.0.3")
	cached, _ := h.mint(capClaims(0))
	path := recordsPath(0, "offset=0")
	if r := h.getFrom(attacker, cached, path); r.status != http.StatusOK {
		t.Fatalf("the attacker's own capability before the attack: %d %s", r.status, r.body)
	}
	fresh, _ := h.mint(holderClaims(0, "member-2")) // a holder never verified from the attacker's address
	for i := range burst {
		expectError(t, h.getFrom(attacker, forged(fresh, i), path), http.StatusUnauthorized, api.CodeUnauthorized)
	}
	r := h.getFrom(attacker, forged(fresh, burst), path)
	expectError(t, r, http.StatusTooManyRequests, api.CodeRateLimited)
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("429 Retry-After %q, want whole seconds >= 1", r.header.Get("Retry-After"))
	}
	expectError(t, h.getFrom(attacker, fresh, path), http.StatusTooManyRequests, api.CodeRateLimited)
	if r := h.getFrom(attacker, cached, path); r.status != http.StatusOK {
		t.Fatalf("a capability verified before the attack, from the attacker's address: %d %s", r.status, r.body)
	}
	if r := h.getFrom(other, fresh, path); r.status != http.StatusOK {
		t.Fatalf("another address's fresh capability: %d %s", r.status, r.body)
	}
	if n := counterValue(t, h.gw.metrics.authFailures); n != burst {
		t.Fatalf("%v failed verifications counted, want %d (refused ones are never checked)", n, burst)
	}
	if n := counterValue(t, h.gw.metrics.authThrottled); n != 2 {
		t.Fatalf("%v tokens counted as refused unchecked, want 2", n)
	}
	if !strings.Contains(string(h.get("", "/metrics").body), "capgate_gateway_auth_failure_addresses 1\n") {
		t.Fatal("/metrics does not show the one address tracked")
	}
}

// TestForgedTokensOverKafkaBudgetedPerAddress: the same attack on the
// Kafka listener's SASL handshake (PLAIN, a forged capability as the
// password): past the burst even a valid token from that address is
// refused (its holder never verified from there), and one from another
// address authenticates.
func TestForgedTokensOverKafkaBudgetedPerAddress(t *testing.T) {
	const burst = 3
	h := newKafkaBudgetHarness(t, burst)
	valid, _ := h.mint(capClaims(0))
	metadata := h.saslMetadata
	for i := range burst {
		if err := metadata("127.0.0.2", forged(valid, i)); err == nil {
			t.Fatalf("forged token %d authenticated", i)
		}
	}
	if n := counterValue(t, h.gw.metrics.authFailures); n != burst {
		t.Fatalf("%v failed verifications counted, want %d", n, burst)
	}
	if err := metadata("127.0.0.2", valid); err == nil {
		t.Fatal("a valid token from an address past its budget authenticated (was it checked?)")
	}
	if n := counterValue(t, h.gw.metrics.authThrottled); n < 1 {
		t.Fatal("the refusal past the budget was not counted")
	}
	if err := metadata("127.0.0.3", valid); err != nil {
		t.Fatalf("a valid token from another address: %v", err)
	}
}

// TestExpiredCapabilitiesAreNoForgeries (redteam20's open point): a
// capability whose signature verifies but whose exp has passed — a slow
// consumer's, expired between its renewal and its fetch — was charged
// to its address's budget of failed verifications like a forgery, so a
// few of them (a consumer catching up after a pause, a NAT of such
// consumers) had every fresh capability from that address refused 429
// unchecked. An expired token is now refused on its claimed exp before
// any signature is checked: 401 token_expired, as before, never served
// (a forgery claiming a past exp is refused the same way), and nothing
// charged — it cost no signature. Forgeries of live tokens are charged
// as ever.
func TestExpiredCapabilitiesAreNoForgeries(t *testing.T) {
	const burst = 3
	h := newHarness(t, func(c *Config) { c.AuthFailuresPerSecond, c.AuthFailureBurst = 0.01, burst })
	consumer := clientFrom("127.0.0.2")
	path := recordsPath(0, "offset=0")
	for i := range burst + 2 {
		expired, _, err := h.minter.Mint(ocap.KindCapability, capClaims(0), time.Now().Add(-time.Duration(i+1)*time.Hour), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		r := h.getFrom(consumer, expired, path)
		expectError(t, r, http.StatusUnauthorized, api.CodeTokenExpired)
		if !strings.Contains(string(r.body), "ago") {
			t.Fatalf("the 401 does not say when it expired: %s", r.body)
		}
		expectError(t, h.getFrom(consumer, expired, path), http.StatusUnauthorized, api.CodeTokenExpired)
	}
	fresh, _ := h.mint(holderClaims(0, "member-2")) // never verified from this address
	if r := h.getFrom(consumer, fresh, path); r.status != http.StatusOK {
		t.Fatalf("a fresh capability after expired ones from its address: %d %s", r.status, r.body)
	}
	expired, _, err := h.minter.Mint(ocap.KindCapability, capClaims(0), time.Now().Add(-time.Hour), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i := range burst + 1 {
		expectError(t, h.getFrom(consumer, forged(expired, i), path), http.StatusUnauthorized, api.CodeTokenExpired)
	}
	if n := counterValue(t, h.gw.metrics.authFailures); n != 0 {
		t.Fatalf("%v failed verifications charged for expired tokens, want 0", n)
	}
	// An expired token of another kind is still told for what it is.
	cred, _ := h.mintCredential([]string{testTopic}, nil, time.Now().Add(-time.Hour), time.Minute)
	if r := h.getFrom(consumer, cred, path); r.status != http.StatusUnauthorized || !strings.Contains(string(r.body), "not a capability") {
		t.Fatalf("an expired client credential at the fetch route: %d %s, want 401 naming its kind", r.status, r.body)
	}
	other, _ := h.mint(holderClaims(0, "member-3"))
	for i := range burst {
		expectError(t, h.getFrom(consumer, forged(other, i), path), http.StatusUnauthorized, api.CodeUnauthorized)
	}
	expectError(t, h.getFrom(consumer, other, path), http.StatusTooManyRequests, api.CodeRateLimited)
}
