package sdk_test

import (
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestIdleGatewayStaysReady: with sync_timeout at its tightest allowed
// value (2 × sync_wait + 500ms), an idle, healthy gateway never refuses:
// its self-fence clock runs from the send time of the last answered poll,
// which is up to two held polls old. (Found by e2e/faults: with the old
// rule sync_wait < sync_timeout, an idle gateway answered 503 for a
// moment after every second empty poll.)
func TestIdleGatewayStaysReady(t *testing.T) {
	t.Parallel()
	tm := sdk.DefaultTiming()
	tm.SyncWait, tm.SyncTimeout = 400*time.Millisecond, 1300*time.Millisecond
	c := sdk.StartCluster(t, sdk.ClusterOptions{Timing: tm})
	url := c.GatewayURLs()[0] + "/readyz"
	checks := 0
	for end := time.Now().Add(4 * tm.SyncTimeout); time.Now().Before(end); checks++ {
		resp, err := c.HTTP().Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("healthy idle gateway answered /readyz %d after %d checks", resp.StatusCode, checks)
		}
		time.Sleep(2 * time.Millisecond) // pacing the probe, not waiting for a condition
	}
}
