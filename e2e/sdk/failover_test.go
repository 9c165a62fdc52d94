package sdk_test

import (
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestGatewayFailover: two gateways; the first is closed mid-stream. The
// consumers (and the producer, which writes through the gateways too)
// carry on through the second: nothing is lost or repeated, and every
// fetch sent after the close goes to the second gateway.
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
		for _, f := range m.Transport.Fetches() {
			if f.Sent.After(closed) && f.Gateway != second.URL {
				t.Errorf("%s fetched partition %d from %s after it closed", m.Name, f.Partition, f.Gateway)
			}
		}
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
