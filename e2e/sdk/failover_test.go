package sdk_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestGatewayFailover: two gateways; the first is closed mid-stream. The
// consumers (and the producer, which writes through the gateways too)
// carry on through the second: nothing is lost or repeated, every record
// delivered after the close came through the second gateway, and a fetch
// after the close goes to the first only as the SDK's failover after a
// failure at the second (it tries the next gateway then) — and fails.
func TestGatewayFailover(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 12, Gateways: 2})
	load := c.StartLoad(t, sdk.LoadOptions{ViaGateway: true, Interval: 10 * time.Millisecond})
	members := []*sdk.Member{
		c.NewMember(t, sdk.MemberOptions{Name: "m1", Group: "failover"}),
		c.NewMember(t, sdk.MemberOptions{Name: "m2", Group: "failover", Raw: true}),
	}
	awaitSplit(t, c, "failover", members, 6)
	flowing(t, members, 300)

	first, second := c.Gateways()[0], c.Gateways()[1]
	for _, m := range members {
		for _, f := range m.Transport.Fetches() {
			if f.Gateway != first.URL {
				t.Fatalf("%s fetched from %s before the failover, want the first gateway", m.Name, f.Gateway)
			}
		}
	}
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	closed := time.Now()
	flowing(t, members, 600)
	stopped := time.Now()
	load.Stop()
	end := c.LogEnd(t)
	ledger := sdk.WaitDelivered(t, wait, end, members...)
	ledger.ExactlyOnce(t, end)
	ledger.Sequential(t, end)
	ledger.Exclusive(t, c.Partitions)
	ledger.Values(t, load)

	var resumed time.Time
	for _, m := range members {
		checkFailedOver(t, m, first.URL, second.URL, closed)
	}
	var gaps []time.Duration
	for p := range c.Partitions {
		for _, d := range ledger.Of(p) {
			if d.At.After(closed) && (resumed.IsZero() || d.At.Before(resumed)) {
				resumed = d.At
			}
		}
		gaps = append(gaps, ledger.Pause(p, closed, stopped))
	}
	if n, err := load.Failures(); n > 0 {
		t.Logf("%d produce calls failed during the failover, last: %v", n, err)
	}
	t.Logf("first record after the close: %v; pause per partition from the close p50 %v max %v",
		resumed.Sub(closed).Round(time.Microsecond), sdk.Percentile(gaps, 0.5), sdk.Percentile(gaps, 1))
}

// checkFailedOver: after closed, m's fetches through first carried no
// record and each followed a failure (transport error or 5xx) at second.
func checkFailedOver(t *testing.T, m *sdk.Member, first, second string, closed time.Time) {
	t.Helper()
	fetches := m.Transport.Fetches()
	var atSecond, probes int
	for _, f := range fetches {
		if !f.Sent.After(closed) {
			continue
		}
		if f.Gateway == second {
			atSecond++
			continue
		}
		probes++
		if f.Status == http.StatusOK {
			t.Errorf("%s: partition %d fetched from %s after it closed: 200", m.Name, f.Partition, f.Gateway)
		}
		if !failedBefore(fetches, second, closed, f.Sent) {
			t.Errorf("%s: partition %d sent to the closed %s at %s without a failure at %s before it", m.Name, f.Partition, first, f.Sent.Format("15:04:05.000"), second)
		}
	}
	if atSecond == 0 {
		t.Errorf("%s sent no fetch to %s after the close", m.Name, second)
	}
	if probes > 0 {
		t.Logf("%s: %d failover attempts at the closed gateway, each after a failure at the other", m.Name, probes)
	}
}

// failedBefore reports whether a fetch at gw failed (transport error or
// 5xx) between from and the instant at.
func failedBefore(fetches []sdk.FetchCall, gw string, from, at time.Time) bool {
	for _, f := range fetches {
		if f.Gateway == gw && f.Done.After(from) && !f.Done.After(at) && (f.Status == 0 || f.Status >= 500) {
			return true
		}
	}
	return false
}
