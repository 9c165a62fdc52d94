package coordinator_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// fromAddr is h with its requests coming from the loopback address ip.
func (h *harness) fromAddr(ip string) *harness {
	return &harness{env: h.env, c: h.c, base: h.base, client: &http.Client{Timeout: 30 * time.Second, Transport: h.transportFrom(ip)}}
}

// forgedSignature is token with a well-formed signature of its own: the
// real header (kid) and claims, so only the signature check refuses it;
// i makes each forgery different (no cache can answer it).
func forgedSignature(token string, i int) string {
	sig := make([]byte, ed25519.SignatureSize)
	binary.BigEndian.PutUint64(sig, uint64(i)+1)
	return token[:strings.LastIndex(token, ".")+1] + base64.RawURLEncoding.EncodeToString(sig)
}

// TestForgedTokensBudgetedPerAddress is the attack: a client with no
// credential sends member tokens with forged signatures (a real kid, a
// real member's claims) to the heartbeat and commit routes, each a
// signature check for the coordinator and never cached, to spend the CPU
// its heartbeats and joins need. (A join's credential is budgeted alike.) Past auth_failure_burst failures its
// address is answered 429 rate_limited with Retry-After unchecked — a
// genuine token it never sent before too — while the genuine member keeps
// heartbeating from its own address, and a token the coordinator verified
// before is accepted from the attacker's address as well (cache hits
// never ask the budget).
func TestForgedTokensBudgetedPerAddress(t *testing.T) {
	const burst = 4
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.AuthFailuresPerSecond, e.cfg.AuthFailureBurst = 0.01, burst // nothing refills during the test
	h := e.start(t)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	a := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	a.heartbeat(t, 1)
	attacker := h.fromAddr("127.0.0.2")
	for i := range burst {
		route := "/v1/groups/g/heartbeat"
		if i%2 == 1 {
			route = "/v1/groups/g/commit"
		}
		attacker.expectError(t, "POST", route, forgedSignature(a.token, i), api.HeartbeatRequest{}, 401, api.CodeUnauthorized)
	}
	status, body, header := attacker.do(t, "POST", "/v1/groups/g/heartbeat", forgedSignature(a.token, burst), api.HeartbeatRequest{WaitMs: 1})
	if status != 429 || errorCode(t, body) != api.CodeRateLimited {
		t.Fatalf("a forged token past the budget: %d %s, want 429 rate_limited", status, body)
	}
	if s, err := strconv.Atoi(header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("Retry-After %q", header.Get("Retry-After"))
	}
	fresh := h.clientCredential(t, []string{"g"}, []string{"orders"}) // never verified: not cached
	attacker.expectError(t, "POST", "/v1/capabilities/attenuate", fresh, map[string]any{}, 429, api.CodeRateLimited)
	attacker.expectError(t, "POST", "/v1/groups/g/join", h.clientCredential(t, []string{"g"}, []string{"orders"}),
		api.JoinRequest{Topics: []string{"orders"}}, 429, api.CodeRateLimited)
	if status, body, _ := attacker.do(t, "POST", "/v1/groups/g/heartbeat", a.token, api.HeartbeatRequest{WaitMs: 1}); status != 200 {
		t.Fatalf("a member token verified before, from the attacker's address: %d %s", status, body)
	}
	a.heartbeat(t, 1) // the member itself, from its own address
	b := h.join(t, "g", fresh, api.JoinRequest{Topics: []string{"orders"}})
	b.heartbeat(t, 1)
	if n := h.metric(t, "capgate_coordinator_auth_failures_total"); n != burst {
		t.Fatalf("%v failed verifications counted, want %d (refused tokens are never checked)", n, burst)
	}
	if n := h.metric(t, "capgate_coordinator_auth_throttled_total"); n != 3 {
		t.Fatalf("%v tokens refused unchecked, want 3", n)
	}

	// A body over the small pre-auth cap has its token checked before the
	// body is read, where the client's address is unknown: those checks
	// share one budget. Past it a forged token on a large body is not
	// checked at all (413, as any unverified bearer's large body).
	large := `{"topics":["orders"],"client_id":"x","metadata":"` + strings.Repeat("x", 5000) + `"}`
	failures, throttled := h.metric(t, "capgate_coordinator_auth_failures_total"), h.metric(t, "capgate_coordinator_auth_throttled_total")
	for i := range burst + 3 {
		status, body, _ := attacker.do(t, "POST", "/v1/groups/g/join", forgedSignature(creds, 100+i), large)
		if status != 413 {
			t.Fatalf("a forged credential on a large body: %d %s, want 413", status, body)
		}
	}
	failed := h.metric(t, "capgate_coordinator_auth_failures_total") - failures
	unchecked := h.metric(t, "capgate_coordinator_auth_throttled_total") - throttled
	if failed != burst || unchecked < 3 { // each kind tried counts a refusal
		t.Fatalf("forged large-body tokens: %v failed their check, %v were not checked; want the pre-auth budget %d, then the rest", failed, unchecked, burst)
	}
}

// TestFirstLargeRequestDuringAForgedFlood (redteam20 #1): the check of a
// large body's bearer from its headers has no client address, so its
// failed checks share one budget, which anyone's forged tokens on large
// bodies spend (no body sent). A large request with a token not verified
// before — a join naming many topics with a new credential, a commit of
// many partitions after a restart emptied the cache — was then 413, which
// clients take as final, for as long as the flood went on. Now its token
// is verified on its own client's budget when the body is refused, and
// the answer is 429 rate_limited with Retry-After; the same request sent
// again is served. The forger's own requests stay 413.
func TestFirstLargeRequestDuringAForgedFlood(t *testing.T) {
	const burst = 3
	topics, partitions := largeJoinTopics()
	e := newEnv(t, partitions)
	e.cfg.AuthFailuresPerSecond, e.cfg.AuthFailureBurst = 0.001, burst // nothing refills during the test
	firstLargeJoinDuringAFlood(t, e.start(t), burst, topics)
}

// largeJoinTopics is 30 topics of one partition whose names make a join
// of about 7 KB, past the body cap of a token not known yet.
func largeJoinTopics() ([]string, map[string]int32) {
	topics := make([]string, 30)
	partitions := map[string]int32{}
	for i := range topics {
		topics[i] = fmt.Sprintf("%s-%03d", strings.Repeat("t", 230), i)
		partitions[topics[i]] = 1
	}
	return topics, partitions
}

// firstLargeJoinDuringAFlood: forged credentials on large joins from
// another address spend the header check's budget of burst and stay 413;
// then a new credential's first large join at h is 429 rate_limited with
// Retry-After, and the same join sent again is served.
func firstLargeJoinDuringAFlood(t *testing.T, h *harness, burst int, topics []string) {
	t.Helper()
	stranger := h.fromAddr("127.0.0.2")
	seen := h.clientCredential(t, []string{"g"}, []string{"*"})
	join := api.JoinRequest{Topics: topics, ClientID: "svc"}
	for i := range 2 * burst {
		if status, body, _ := stranger.do(t, "POST", "/v1/groups/g/join", forgedSignature(seen, i), join); status != http.StatusRequestEntityTooLarge {
			t.Fatalf("a forged credential on a large join: %d %s, want 413", status, body)
		}
	}
	fresh := h.clientCredential(t, []string{"g"}, []string{"*"}) // never verified: not cached
	status, body, header := h.do(t, "POST", "/v1/groups/g/join", fresh, join)
	if status != http.StatusTooManyRequests || errorCode(t, body) != api.CodeRateLimited || header.Get("Retry-After") == "" {
		t.Fatalf("a new credential's first large join during a forged flood: %d %s, want 429 rate_limited with Retry-After", status, body)
	}
	if status, body, _ = h.do(t, "POST", "/v1/groups/g/join", fresh, join); status != http.StatusOK {
		t.Fatalf("the same join sent again: %d %s, want 200", status, body)
	}
}
