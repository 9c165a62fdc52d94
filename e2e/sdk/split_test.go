package sdk_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/sdk"
)

// wait bounds every wait of the suite: generous, for a loaded machine.
const wait = 20 * time.Second

// TestSplit: three consumers of one group over real HTTP split twelve
// partitions four each; no partition is delivered to two consumers at
// once, and every record produced (through the gateway) is delivered
// exactly once, across the handoffs of the joins.
func TestSplit(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 12})
	load := c.StartLoad(t, sdk.LoadOptions{ViaGateway: true, Interval: 10 * time.Millisecond})
	var members []*sdk.Member
	for i := range 3 {
		members = append(members, c.NewMember(t, sdk.MemberOptions{Name: fmt.Sprintf("m%d", i+1), Group: "split"}))
	}
	sdk.Eventually(t, wait, "three members with four partitions each", func() (bool, string) {
		if ok, why := c.Settled(t, "split", 3); !ok {
			return false, why
		}
		for _, m := range members {
			if n := len(m.Assigned()); n != 4 {
				return false, fmt.Sprintf("%s fetches %d partitions", m.Name, n)
			}
		}
		return true, ""
	})
	// Keep producing for a while with the split settled.
	settled := sdk.NewLedger(members...).Count()
	sdk.Eventually(t, wait, "records flowing after the split", func() (bool, string) {
		n := sdk.NewLedger(members...).Count()
		return n >= settled+200, fmt.Sprintf("%d new deliveries", n-settled)
	})
	load.Stop()
	if n, err := load.Failures(); n > 0 {
		t.Logf("%d produce calls failed, last: %v", n, err)
	}
	end := c.LogEnd(t)
	ledger := sdk.WaitDelivered(t, wait, end, members...)
	ledger.ExactlyOnce(t, end)
	ledger.Sequential(t, end)
	ledger.Exclusive(t, c.Partitions)
	ledger.Values(t, load)

	owners := map[int32]string{}
	for _, m := range members {
		for _, p := range m.Assigned() {
			if other, ok := owners[p]; ok {
				t.Errorf("partition %d assigned to %s and %s", p, other, m.Name)
			}
			owners[p] = m.Name
		}
	}
	if len(owners) != int(c.Partitions) {
		t.Errorf("%d partitions assigned, want %d", len(owners), c.Partitions)
	}
	t.Logf("%d records produced through the gateway, %d delivered", load.Count(), ledger.Count())
}
