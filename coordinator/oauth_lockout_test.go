package coordinator_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/coordinator"
)

// tokenClientFrom is an HTTP client whose connections come from the
// loopback address ip (harness.transportFrom).
func tokenClientFrom(h *harness, ip string) *http.Client {
	return &http.Client{Transport: h.transportFrom(ip), Timeout: 30 * time.Second}
}

// guess sends a wrong secret for clientID from client and returns the
// status and, for a 429, its Retry-After in seconds.
func guess(t *testing.T, h *harness, client *http.Client, clientID string) (int, int) {
	t.Helper()
	secret := "guess-" + strconv.Itoa(int(time.Now().UnixNano()))
	h.env.remember(secret)
	status, body, header := tokenRequestVia(t, h, client, clientCredentialsForm(), []string{clientID, secret})
	switch {
	case status == 401 && body["error"] == "invalid_client":
		return status, 0
	case status == 429 && body["error"] == "temporarily_unavailable":
		retry, err := strconv.Atoi(header.Get("Retry-After"))
		if err != nil || retry < 1 {
			t.Fatalf("429 with Retry-After %q", header.Get("Retry-After"))
		}
		return status, retry
	}
	t.Fatalf("a wrong secret: %d %v, want 401 invalid_client or 429 temporarily_unavailable", status, body)
	return 0, 0
}

// obtains asserts that o's right secret gets a token from client.
func obtains(t *testing.T, h *harness, client *http.Client, o coordinator.OAuthClientCreated, from string) {
	t.Helper()
	status, body, _ := tokenRequestVia(t, h, client, clientCredentialsForm(), []string{o.ClientID, o.ClientSecret})
	if status != 200 || body["access_token"] == nil {
		t.Fatalf("the right secret from %s: %d %v, want 200 and a token", from, status, body)
	}
	h.env.remember(body["access_token"].(string))
}

// TestOAuthGuessingCannotLockOutTheClient is the red team's attack:
// client ids are not secret (every credential's sub is oauth:<id>), and
// twelve wrong secrets for one from 127.0.0.3 locked the real client out
// of /oauth/token — 429 for its right secret from anywhere, for as long
// as the guessing went on. Now the secret is checked first: the
// attacker's own guessing is 401 for oauth.max_failures guesses, then 429
// with Retry-After (counted in
// capgate_coordinator_oauth_token_refusals_total{reason="throttled"},
// warned with its address, never a secret), while the right secret gets
// its token from other addresses and from the attacker's own address too
// (which may be the client's NAT or the ingress proxy every client comes
// through: refusing the right secret there would hand the attacker the
// lockout back).
func TestOAuthGuessingCannotLockOutTheClient(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.OAuth.MaxFailures = 3
	e.cfg.OAuth.FailureWindow = time.Hour // nothing refills during the test
	h := e.start(t)
	victim := createOAuthClient(t, h, "victim", []string{"g"})
	attacker := tokenClientFrom(h, "127.0.0.3")
	for i := range 12 {
		status, retry := guess(t, h, attacker, victim.ClientID)
		switch {
		case i < 3 && status != 401:
			t.Fatalf("wrong secret %d: %d, want 401 within oauth.max_failures", i+1, status)
		case i >= 3 && (status != 429 || retry > 1200):
			t.Fatalf("wrong secret %d: %d Retry-After %d, want 429 within one failure's refill (1200 s)", i+1, status, retry)
		}
	}
	obtains(t, h, tokenClientFrom(h, "127.0.0.4"), victim, "127.0.0.4")
	obtains(t, h, tokenClientFrom(h, "127.0.0.5"), victim, "127.0.0.5")
	obtains(t, h, attacker, victim, "the attacker's address")
	if status, _ := guess(t, h, attacker, victim.ClientID); status != 429 {
		t.Fatalf("the attacker after the client's success: %d, want still 429", status)
	}
	if got := h.metric(t, `capgate_coordinator_oauth_token_refusals_total{reason="throttled"}`); got != 10 {
		t.Fatalf("throttled refusals counted %v, want 10", got)
	}
	if got := h.metric(t, `capgate_coordinator_oauth_token_refusals_total{reason="invalid_client"}`); got != 3 {
		t.Fatalf("invalid_client refusals counted %v, want 3", got)
	}
	warned := e.logs.FilterMessage("oauth client refused").
		FilterField(zapcore.Field{Key: "address", Type: zapcore.StringType, String: "127.0.0.3"}).
		FilterField(zapcore.Field{Key: "reason", Type: zapcore.StringType, String: "throttled"})
	if warned.Len() == 0 || warned.All()[0].Level != zapcore.WarnLevel || warned.All()[0].ContextMap()["client_id"] != victim.ClientID {
		t.Fatalf("no warning naming the throttled address and client: %v", e.logs.FilterMessage("oauth client refused").All())
	}
	e.checkLogs(t) // no secret, right or wrong, in any line
}

// TestOAuthGuessingLimitedPerAddress: an address guessing across client
// ids (unknown ones, another client's) has oauth.max_failures failures in
// all, then 429 for any id; other addresses are untouched, and a client's
// right secret from that address still gets its token.
func TestOAuthGuessingLimitedPerAddress(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.OAuth.MaxFailures = 3
	e.cfg.OAuth.FailureWindow = time.Hour
	h := e.start(t)
	victim := createOAuthClient(t, h, "victim", []string{"g"})
	attacker := tokenClientFrom(h, "127.0.0.6")
	for i := range 3 {
		if status, _ := guess(t, h, attacker, "cg-guess"+strconv.Itoa(i)); status != 401 {
			t.Fatalf("failure %d from the address: %d, want 401", i+1, status)
		}
	}
	for _, id := range []string{"cg-guess-next", victim.ClientID} {
		if status, _ := guess(t, h, attacker, id); status != 429 {
			t.Fatalf("client %s from the address past its failures: %d, want 429", id, status)
		}
	}
	if status, _ := guess(t, h, tokenClientFrom(h, "127.0.0.7"), victim.ClientID); status != 401 {
		t.Fatalf("another address: %d, want 401", status)
	}
	obtains(t, h, attacker, victim, "the throttled address")
	e.checkLogs(t)
}

// TestOAuthFailureBudgetBoundedOverHTTP: the attack is failing from ever
// new addresses, each a new entry in the failure budget's table. The
// table holds at most oauth.limiter_entries addresses
// (capgate_coordinator_oauth_failure_addresses); past it new ones share
// one budget of oauth.max_failures, so the flood is throttled together
// (429) — but the right secret from any address still gets its token. A
// window later the flood's addresses make room. Before, a full table of
// failing keys refused every new key, the right secret's too.
func TestOAuthFailureBudgetBoundedOverHTTP(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.OAuth.MaxFailures = 2
	e.cfg.OAuth.FailureWindow = time.Minute
	e.cfg.OAuth.LimiterEntries = 4
	clock := &movedClock{}
	clock.ns.Store(time.Now().UnixNano())
	h := e.start(t, clock.option())
	victim := createOAuthClient(t, h, "victim", []string{"g"})
	// Four addresses fill the table; the next two fail into the shared
	// budget; then every new address is throttled with it.
	for i := 10; i < 20; i++ {
		status, _ := guess(t, h, tokenClientFrom(h, "127.0.0."+strconv.Itoa(i)), victim.ClientID)
		if want := map[bool]int{true: 401, false: 429}[i < 16]; status != want {
			t.Fatalf("address 127.0.0.%d: %d, want %d", i, status, want)
		}
		if got := h.metric(t, "capgate_coordinator_oauth_failure_addresses"); got != float64(min(i-9, 4)) {
			t.Fatalf("after address 127.0.0.%d the budget tracks %v addresses, want %d", i, got, min(i-9, 4))
		}
	}
	obtains(t, h, tokenClientFrom(h, "127.0.0.30"), victim, "a new address while the table is full")
	obtains(t, h, tokenClientFrom(h, "127.0.0.10"), victim, "a tracked address")

	clock.add(time.Minute + time.Second) // every bucket refilled
	if status, _ := guess(t, h, tokenClientFrom(h, "127.0.0.21"), victim.ClientID); status != 401 {
		t.Fatalf("a new address a window later: %d, want 401", status)
	}
	if got := h.metric(t, "capgate_coordinator_oauth_failure_addresses"); got != 1 {
		t.Fatalf("a window later the budget tracks %v addresses, want only the new one", got)
	}
}
