package sdk_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestRenewalsInTime runs a member for several leases of a short
// capability lease (5s, heartbeat_wait 1s < lease/2). Every
// partition's capability is renewed in heartbeats (same epoch, new jti)
// before the old one enters the client's expiry margin, so no partition
// ever waits for a renewal, and no fetch is refused for expiry.
//
// The SDK's heartbeat comes back by the time a capability passes half
// its life and the coordinator renews it at the next one, so the renewal
// has about half the capability's life to reach a fetch before the old
// one enters the margin. At a 3 s lease (a life of 2-3 s: exp is whole
// seconds) that was 1-1.5 s less the 300 ms margin, and the smallest
// slack measured 0.27-1.16 s over 6 runs at load 7: a loaded CI machine's
// delays could eat it. At 5 s the renewal comes a second earlier.
func TestRenewalsInTime(t *testing.T) {
	t.Parallel()
	timing := sdk.DefaultTiming()
	timing.CapabilityLease = 5 * time.Second
	timing.HeartbeatWait = time.Second
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 4, Timing: timing})
	load := c.StartLoad(t, sdk.LoadOptions{Interval: 10 * time.Millisecond})
	// exp is whole seconds (floor), so a capability lives between 4s and
	// 5s here; its renewal is due when less than 2.5s is left.
	const margin = 300 * time.Millisecond
	m := c.NewMember(t, sdk.MemberOptions{Name: "m1", Group: "renew", Configure: func(cfg *client.Config) {
		cfg.CapabilityExpiryMargin = margin
	}})
	start := time.Now()
	sdk.Eventually(t, wait, "three renewals of every partition", func() (bool, string) {
		return renewals(m.Transport.Fetches(), c.Partitions) >= 3, ""
	})
	load.Stop()
	end := c.LogEnd(t)
	sdk.WaitDelivered(t, wait, end, m).ExactlyOnce(t, end)

	slack := time.Duration(1 << 62)
	previous := map[int32]sdk.FetchCall{}
	for _, f := range m.Transport.Fetches() {
		if f.Status == http.StatusUnauthorized {
			t.Errorf("fetch of partition %d refused 401: %s", f.Partition, f.Body)
		}
		prev, ok := previous[f.Partition]
		previous[f.Partition] = f
		if !ok || prev.JTI == f.JTI || prev.Epoch != f.Epoch {
			continue
		}
		// The first fetch with the renewed capability must be sent before
		// the old one entered the margin: otherwise the partition waited.
		left := prev.Expires.Add(-margin).Sub(f.Sent)
		slack = min(slack, left)
		if left <= 0 {
			t.Errorf("partition %d: renewal used %v after the old capability entered the expiry margin", f.Partition, -left)
		}
	}
	t.Logf("%v: renewals per partition ≥ 3; smallest slack between a renewal's first use and the old capability's margin: %v",
		time.Since(start).Round(time.Millisecond), slack.Round(time.Millisecond))
}

// renewals is the smallest number of capability changes at the same epoch
// seen in the fetches of any partition.
func renewals(fetches []sdk.FetchCall, partitions int32) int {
	counts := map[int32]int{}
	last := map[int32]sdk.FetchCall{}
	for _, f := range fetches {
		if prev, ok := last[f.Partition]; ok && prev.Epoch == f.Epoch && prev.JTI != f.JTI {
			counts[f.Partition]++
		}
		last[f.Partition] = f
	}
	least := -1
	for p := range partitions {
		if least < 0 || counts[p] < least {
			least = counts[p]
		}
	}
	return least
}
