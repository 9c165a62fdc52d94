package harness

import (
	"testing"
	"time"
)

// Eventually polls cond every 20ms until it holds, failing the test with
// what and cond's last explanation after timeout. It is for waiting on
// real sockets, processes and the broker: timeouts are generous and are
// never assertions about speed.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cleanup registers fn with t.Cleanup and logs it when it took over a
// second (shutdown paths are bounded by timeouts a test should not be
// waiting for).
func cleanup(t testing.TB, what string, fn func()) {
	t.Cleanup(func() {
		start := time.Now()
		fn()
		if d := time.Since(start); d > time.Second {
			t.Logf("cleanup: %s took %v", what, d.Round(time.Millisecond))
		}
	})
}
