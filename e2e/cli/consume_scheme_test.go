package cli_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConsumeHTTPURLToTLSGatewayStops: `capgate consume --gateways
// http://…` against `capgate dev --tls` exits non-zero at once with one
// message saying the gateway speaks TLS, to use https:// and naming
// --gateways, printed once. Before, consume retried for ever, logging "fetch failed: the gateway
// did not answer; retrying … EOF" every 10 s (the TLS port closed the
// plaintext request without a word).
func TestConsumeHTTPURLToTLSGatewayStops(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir(), "--tls")
	plain := "http://" + strings.TrimPrefix(d.gateway, "https://")
	args := []string{"consume", "--group", "scheme", "--topic", "demo",
		"--credential-file", filepath.Join(d.dataDir, "credentials.json"),
		"--cacert", filepath.Join(d.dataDir, "tls", "ca.crt"),
		"--coordinator", d.coordinator, "--gateways", plain}
	start := time.Now()
	_, stderr := runFailing(t, 30*time.Second, args...)
	for _, want := range []string{plain + " speaks TLS: use https://", "--gateways", "--cacert"} {
		if !strings.Contains(stderr, want) {
			t.Fatalf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	if n := strings.Count(stderr, "speaks TLS"); n != 1 {
		t.Errorf("the error is printed %d times, want once:\n%s", n, stderr)
	}
	if strings.Contains(stderr, "did not answer") {
		t.Errorf("stderr says the gateway did not answer:\n%s", stderr)
	}
	t.Logf("consume exited after %s:\n%s", time.Since(start).Round(time.Millisecond), stderr)
	d.stop(true)
}
