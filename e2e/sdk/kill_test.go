package sdk_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestKilledMember: a consumer dies without leaving (its transport is cut
// and its poll loop stopped, no Close). After its session timeout the
// coordinator reassigns its partitions; the survivors start at the last
// offsets it committed, so nothing is lost and the only duplicates are
// records it was handed after its last confirmed commit.
func TestKilledMember(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 12})
	load := c.StartLoad(t, sdk.LoadOptions{Interval: 10 * time.Millisecond})
	opts := func(name string) sdk.MemberOptions {
		return sdk.MemberOptions{Name: name, Group: "kill", SessionTimeout: 1500 * time.Millisecond, CommitInterval: 100 * time.Millisecond}
	}
	members := []*sdk.Member{c.NewMember(t, opts("m1")), c.NewMember(t, opts("m2")), c.NewMember(t, opts("m3"))}
	awaitSplit(t, c, "kill", members, 4)
	flowing(t, members, 300)

	victim, survivors := members[0], members[1:]
	lost := victim.Assigned()
	victim.Kill()
	killed := time.Now()
	acked := victim.Acked()
	sdk.Eventually(t, wait, "survivors own all partitions", func() (bool, string) {
		if ok, why := c.Settled(t, "kill", 2); !ok {
			return false, why
		}
		n := len(survivors[0].Assigned()) + len(survivors[1].Assigned())
		return n == int(c.Partitions), fmt.Sprintf("survivors fetch %d partitions", n)
	})
	reassigned := time.Now()
	flowing(t, survivors, 300)
	load.Stop()
	end := c.LogEnd(t)
	ledger := sdk.WaitDelivered(t, wait, end, members...)
	dups := ledger.Duplicates(t, end)
	ledger.Exclusive(t, c.Partitions)
	ledger.Values(t, load)

	for p, offsets := range dups {
		if !slices.Contains(lost, p) {
			t.Errorf("partition %d (not the victim's) has %d duplicates", p, len(offsets))
		}
	}
	total := 0
	for _, p := range lost {
		stints := ledger.Stints(p)
		dead, next := lastStintOf(stints, victim.Name), stints[len(stints)-1]
		if dead == nil || next.Member == victim.Name {
			t.Errorf("partition %d: stints %v: want the victim's, then a survivor's", p, stints)
			continue
		}
		start := next.First.Offset
		if start < acked[p] {
			t.Errorf("partition %d: survivor started at %d, below the victim's confirmed commit %d", p, start, acked[p])
		}
		if start > dead.Last.Offset+1 {
			t.Errorf("partition %d: survivor started at %d, after the victim's last record %d: lost records", p, start, dead.Last.Offset)
		}
		repeated := int(dead.Last.Offset + 1 - start)
		afterCommit := int(dead.Last.Offset + 1 - acked[p])
		if len(dups[p]) != repeated || repeated > afterCommit {
			t.Errorf("partition %d: %d duplicates, %d expected (victim delivered up to %d, confirmed %d, survivor started %d)",
				p, len(dups[p]), repeated, dead.Last.Offset, acked[p], start)
		}
		total += repeated
	}
	t.Logf("victim's partitions %v reassigned %v after the kill (session timeout 1.5s); %d records repeated", lost, reassigned.Sub(killed).Round(time.Millisecond), total)
}

func lastStintOf(stints []sdk.Stint, member string) *sdk.Stint {
	for i := len(stints) - 1; i >= 0; i-- {
		if stints[i].Member == member {
			return &stints[i]
		}
	}
	return nil
}
