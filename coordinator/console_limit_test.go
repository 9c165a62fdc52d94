package coordinator_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/api"
)

// from makes c's requests come from the loopback address ip (Linux
// routes all of 127.0.0.0/8 to lo), as another client address would.
func (c *consoleClient) from(ip string) *consoleClient {
	c.client.Transport = c.h.transportFrom(ip)
	return c
}

// TestConsoleLoginFailuresLimitedPerAddress: the attack is guessing
// console logins without end. Past console.login_max_failures failed
// logins from one address within console.login_failure_window, a login
// from it is 429 rate_limited with Retry-After and the JSON error body
// (retry_after_ms) — the admin token too: it is not looked at, and no
// session starts — with a warning naming the address (never a token) and
// capgate_coordinator_console_login_refusals_total{reason="rate_limited"}
// counting it; another address still logs in. A browser (Accept:
// text/html) gets the login form saying when to try again. Before,
// every guess was answered 401 and the next one taken.
func TestConsoleLoginFailuresLimitedPerAddress(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.Console.LoginMaxFailures = 3
	e.cfg.Console.LoginFailureWindow = time.Hour // nothing refills during the test
	h := e.start(t)
	attacker := newConsoleClient(t, h).from("127.0.0.2")
	for i := range 3 {
		if a := attacker.login("guess-"+strconv.Itoa(i), nil); a.status != 401 {
			t.Fatalf("failed login %d: %d, want 401", i+1, a.status)
		}
	}
	for _, token := range []string{"guess-3", e.adminToken} {
		a := attacker.login(token, nil)
		var body api.ErrorBody
		if err := json.Unmarshal([]byte(a.body), &body); err != nil || a.status != 429 || body.Error.Code != api.CodeRateLimited {
			t.Fatalf("login past the failures: %d %s, want 429 rate_limited", a.status, a.body)
		}
		retry, err := strconv.Atoi(a.header.Get("Retry-After"))
		if wait, _ := body.Error.Details["retry_after_ms"].(float64); err != nil || retry < 1 || wait <= 0 || retry > 3600 {
			t.Fatalf("Retry-After %q, retry_after_ms %v", a.header.Get("Retry-After"), body.Error.Details["retry_after_ms"])
		}
		if attacker.cookies["capgate_console"] != "" {
			t.Fatal("a rate-limited login started a session")
		}
	}
	page := attacker.login(e.adminToken, map[string]string{"Accept": "text/html,application/xhtml+xml"})
	if page.status != 429 || !strings.Contains(page.body, `id="login-error"`) || !strings.Contains(page.body, "Too many failed logins from your address") {
		t.Fatalf("a browser's rate-limited login: %d %.300s", page.status, page.body)
	}
	if a := newConsoleClient(t, h).from("127.0.0.3").login(e.adminToken, nil); a.status != 303 {
		t.Fatalf("the admin from another address: %d, want 303", a.status)
	}
	if got := h.metric(t, `capgate_coordinator_console_login_refusals_total{reason="rate_limited"}`); got != 3 {
		t.Fatalf("rate_limited refusals counted %v, want 3", got)
	}
	if got := h.metric(t, `capgate_coordinator_console_login_refusals_total{reason="wrong_token"}`); got != 3 {
		t.Fatalf("wrong_token refusals counted %v, want 3", got)
	}
	warned := e.logs.FilterMessageSnippet("console login rate limited").FilterField(zapcore.Field{Key: "address", Type: zapcore.StringType, String: "127.0.0.2"})
	if warned.Len() == 0 || warned.All()[0].Level != zapcore.WarnLevel {
		t.Fatalf("no warning naming the address: %v", e.logs.FilterMessageSnippet("console login").All())
	}
	e.checkLogs(t)
}

// TestConsoleLoginLimiterBounded: the attack is guessing from many
// addresses, each a new entry in the limiter's table. It holds at most
// console.login_limiter_entries addresses; while every one is still
// failing, a login from a new address is 429 too (rather than forget a
// guesser), and the table does not grow.
func TestConsoleLoginLimiterBounded(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.Console.LoginMaxFailures = 2
	e.cfg.Console.LoginFailureWindow = time.Hour
	e.cfg.Console.LoginLimiterEntries = 3
	h := e.start(t)
	for i := 2; i <= 4; i++ {
		if a := newConsoleClient(t, h).from("127.0.0."+strconv.Itoa(i)).login("guess", nil); a.status != 401 {
			t.Fatalf("address %d: %d, want 401", i, a.status)
		}
	}
	for i := 5; i <= 8; i++ {
		a := newConsoleClient(t, h).from("127.0.0."+strconv.Itoa(i)).login("guess", nil)
		if a.status != 429 || errorCode(t, []byte(a.body)) != api.CodeRateLimited || a.header.Get("Retry-After") == "" {
			t.Fatalf("address %d with the table full: %d %s, want 429 rate_limited", i, a.status, a.body)
		}
	}
	if got := h.metric(t, "capgate_coordinator_console_login_addresses"); got != 3 {
		t.Fatalf("addresses tracked: %v, want 3", got)
	}
}
