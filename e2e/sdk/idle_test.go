package sdk_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestIdleGatewayStaysReady is the regression test of BENCHMARKS.md's
// bug 1: with sync_timeout at its tightest allowed value (2 × sync_wait +
// 500ms), an idle, healthy gateway never refuses — neither /readyz nor a
// fetch (the bug answered fetches 503 out_of_sync for a moment before
// every answered idle poll). Its self-fence clock runs from the send time
// of the last answered poll, which is up to two held polls old. The
// probes run for four sync timeouts, i.e. through eight held polls. Not
// parallel: it asserts a margin of 500ms, which a machine saturated by
// the package's other tests could eat.
func TestIdleGatewayStaysReady(t *testing.T) {

	tm := sdk.DefaultTiming()
	tm.SyncWait, tm.SyncTimeout = 400*time.Millisecond, 1300*time.Millisecond
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 1, Timing: tm})
	var grant api.CapabilityResponse
	req := coordinator.SharedGrantRequest{Topic: c.Topic, Partition: 0, Ops: []string{"fetch"}, TTLMs: 60_000, Holder: "idle-probe"}
	if status, raw := c.Admin(t, http.MethodPost, "/v1/admin/capabilities", req, &grant); status != http.StatusOK {
		t.Fatalf("mint a fetch capability: %d %s", status, raw)
	}
	gw := c.GatewayURLs()[0]
	fetch := gw + "/v1/topics/" + c.Topic + "/partitions/0/records?offset=0&max_wait_ms=0"
	checks := 0
	for end := time.Now().Add(4 * tm.SyncTimeout); time.Now().Before(end); checks++ {
		if status, body := probe(t, c, gw+"/readyz", ""); status != http.StatusOK {
			t.Fatalf("healthy idle gateway answered /readyz %d after %d checks: %s", status, checks, body)
		}
		if status, body := probe(t, c, fetch, grant.Capability); status != http.StatusOK {
			t.Fatalf("healthy idle gateway answered a fetch %d after %d checks: %s", status, checks, body)
		}
		time.Sleep(2 * time.Millisecond) // pacing the probe, not waiting for a condition
	}
	t.Logf("%d readiness and fetch probes answered 200", checks)
}

func probe(t *testing.T, c *sdk.Cluster, url, bearer string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.HTTP().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode, fmt.Sprintf("%s", body)
}
