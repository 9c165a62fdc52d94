package console

import (
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestConsoleLoginRateLimitShown: in a real Chromium, once an address
// has used console.login_max_failures failed logins, the next login —
// the admin token's too — stays on the login form, which says the
// address made too many failed logins and when to try again (the answer
// is 429 with Retry-After); before the limit, a wrong token is told as
// before.
func TestConsoleLoginRateLimitShown(t *testing.T) {
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: 1, CoordinatorConfig: func(cfg *coordinator.Config) {
		cfg.Console.LoginMaxFailures = 2
		cfg.Console.LoginFailureWindow = time.Hour
	}})
	base := cluster.CoordinatorURL
	b := newBrowser(t)
	for range 2 {
		login(b, base, "not-the-admin-token")
		b.waitFor("wrong token refused", time.Now(), 10*time.Second,
			`location.pathname === '/console/login' && document.querySelector('#login-error')?.textContent.includes('not an admin token')`)
	}
	login(b, base, cluster.AdminToken)
	b.waitFor("the rate limit shown", time.Now(), 10*time.Second,
		`location.pathname === '/console/login' && /Too many failed logins from your address\. Try again in \d+ seconds\./.test(document.querySelector('#login-error')?.textContent)`)
	b.screenshot("login-rate-limited")
	b.noProblems("rate-limited login")
}
