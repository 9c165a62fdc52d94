package coordinator

import (
	"net/netip"
	"testing"
	"time"
)

// TestOAuthFailureBudget: the token endpoint's budget is
// oauth.max_failures per address refilled evenly over
// oauth.failure_window.
func TestOAuthFailureBudget(t *testing.T) {
	g := newOAuthFailureGuard(OAuthConfig{MaxFailures: 3, FailureWindow: time.Minute, LimiterEntries: 10})
	t0 := time.Unix(1_800_000_000, 0)
	a := netip.MustParseAddr("192.0.2.1")
	for i := range 3 {
		if _, blocked := g.Blocked(a, t0); blocked {
			t.Fatalf("blocked after %d failures of 3", i)
		}
		g.Failed(a, t0)
	}
	if wait, blocked := g.Blocked(a, t0); !blocked || wait != 20*time.Second {
		t.Fatalf("after 3 failures: blocked %t for %v, want 20s (one failure's refill of 3/min)", blocked, wait)
	}
	if _, blocked := g.Blocked(netip.MustParseAddr("192.0.2.2"), t0); blocked {
		t.Fatal("another IPv4 address shares the budget")
	}
}
