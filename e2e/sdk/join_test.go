package sdk_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestJoinMidStream: a fourth consumer joins three while records flow,
// through two gateways.
// Exactly the partitions that move to it are revoked (three, one from
// each), their new owner starts exactly where the old owner stopped (the
// committed offset), nothing is lost or repeated, and the nine unmoved
// partitions are never revoked. The pause of each moved partition and the
// join → newcomer-consuming latency are logged (measured, not asserted).
func TestJoinMidStream(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 12, Gateways: 2})
	load := c.StartLoad(t, sdk.LoadOptions{Interval: 5 * time.Millisecond})
	// Old and new owners of a partition read through different gateways:
	// a handoff needs the fence on both.
	urls := c.GatewayURLs()
	order := [][]string{urls, {urls[1], urls[0]}}
	var members []*sdk.Member
	for i := range 3 {
		members = append(members, c.NewMember(t, sdk.MemberOptions{
			Name: fmt.Sprintf("m%d", i+1), Group: "join", Raw: i == 0, Gateways: order[i%2],
		}))
	}
	awaitSplit(t, c, "join", members, 4)
	before := map[int32]string{}
	for _, m := range members {
		for _, p := range m.Assigned() {
			before[p] = m.Name
		}
	}
	flowing(t, members, 300)

	newcomer := c.NewMember(t, sdk.MemberOptions{Name: "m4", Group: "join", Gateways: order[1]})
	joined := newcomer.JoinStarted
	all := append(slices.Clone(members), newcomer)
	awaitSplit(t, c, "join", all, 3)
	flowing(t, all, 300)
	load.Stop()
	end := c.LogEnd(t)
	ledger := sdk.WaitDelivered(t, wait, end, all...)
	ledger.ExactlyOnce(t, end)
	ledger.Sequential(t, end)
	ledger.Exclusive(t, c.Partitions)
	ledger.Values(t, load)

	moved := newcomer.Assigned()
	if len(moved) != 3 {
		t.Fatalf("newcomer holds %v, want 3 partitions", moved)
	}
	from := map[string]int{}
	for _, p := range moved {
		from[before[p]]++
	}
	for _, m := range members {
		if from[m.Name] != 1 {
			t.Errorf("moved partitions %v came from %v: want one from each old member", moved, from)
		}
	}
	checkRevokedOnly(t, members, joined, moved)
	checkHandoffs(t, ledger, moved, before, newcomer)
	reportPauses(t, ledger, moved, joined, newcomer)
}

// awaitSplit waits until the group settled with each member fetching
// perMember partitions (the last may differ when they do not divide).
func awaitSplit(t *testing.T, c *sdk.Cluster, group string, members []*sdk.Member, perMember int) {
	t.Helper()
	sdk.Eventually(t, wait, fmt.Sprintf("%d members with %d partitions each", len(members), perMember), func() (bool, string) {
		if ok, why := c.Settled(t, group, len(members)); !ok {
			return false, why
		}
		for _, m := range members {
			if n := len(m.Assigned()); n != perMember {
				return false, fmt.Sprintf("%s fetches %d partitions", m.Name, n)
			}
		}
		return true, ""
	})
}

// flowing waits until the members delivered n more records.
func flowing(t *testing.T, members []*sdk.Member, n int) {
	t.Helper()
	start := sdk.NewLedger(members...).Count()
	sdk.Eventually(t, wait, fmt.Sprintf("%d more records delivered", n), func() (bool, string) {
		got := sdk.NewLedger(members...).Count() - start
		return got >= n, fmt.Sprintf("%d delivered", got)
	})
}

// checkRevokedOnly fails if an old member's revoke hook named a partition
// outside moved after since, or a moved partition was not revoked.
func checkRevokedOnly(t *testing.T, members []*sdk.Member, since time.Time, moved []int32) {
	t.Helper()
	revoked := map[int32]int{}
	for _, m := range members {
		for _, h := range m.Hooks() {
			if h.At.Before(since) || h.Kind == sdk.HookGrant {
				continue
			}
			for _, p := range h.Partitions {
				revoked[p]++
				if !slices.Contains(moved, p) {
					t.Errorf("%s: %s hook for unmoved partition %d", m.Name, h.Kind, p)
				}
			}
		}
	}
	for _, p := range moved {
		if revoked[p] != 1 {
			t.Errorf("moved partition %d revoked %d times, want once", p, revoked[p])
		}
	}
}

// checkHandoffs: each moved partition ends with the old owner's stint then
// the newcomer's; the newcomer's first fetch (its grant offset, the
// committed offset) and first record are right after the old owner's
// last record.
func checkHandoffs(t *testing.T, ledger *sdk.Ledger, moved []int32, before map[int32]string, newcomer *sdk.Member) {
	t.Helper()
	for _, p := range moved {
		stints := ledger.Stints(p)
		if len(stints) < 2 {
			t.Errorf("partition %d: %d stints, want the old owner's then the newcomer's", p, len(stints))
			continue
		}
		old, next := stints[len(stints)-2], stints[len(stints)-1]
		if old.Member != before[p] || next.Member != newcomer.Name {
			t.Errorf("partition %d: last stints %s then %s, want %s then %s", p, old.Member, next.Member, before[p], newcomer.Name)
		}
		if start := firstFetch(newcomer, p); start != old.Last.Offset+1 {
			t.Errorf("partition %d: newcomer's grant started at %d, old owner committed after %d", p, start, old.Last.Offset)
		}
		if next.Epoch <= old.Epoch {
			t.Errorf("partition %d: newcomer epoch %d not above %d", p, next.Epoch, old.Epoch)
		}
		if next.First.Offset != old.Last.Offset+1 {
			t.Errorf("partition %d: newcomer started at %d, old owner stopped after %d", p, next.First.Offset, old.Last.Offset)
		}
	}
}

// reportPauses logs the pause (timeline.Pause) of the moved and the
// unmoved partitions from the join until the last moved partition
// resumed, and the join → first record latency.
func reportPauses(t *testing.T, ledger *sdk.Ledger, moved []int32, joined time.Time, newcomer *sdk.Member) {
	t.Helper()
	var movedGaps []time.Duration
	var last time.Time
	for _, p := range moved {
		stints := ledger.Stints(p)
		if next := stints[len(stints)-1]; next.First.At.After(last) {
			last = next.First.At
		}
	}
	for _, p := range moved {
		movedGaps = append(movedGaps, ledger.Pause(p, joined, last))
	}
	var unmovedGaps []time.Duration
	for p := range int32(12) {
		if !slices.Contains(moved, p) {
			unmovedGaps = append(unmovedGaps, ledger.Pause(p, joined, last))
		}
	}
	var first time.Time
	for _, d := range newcomer.Deliveries() {
		if first.IsZero() || d.At.Before(first) {
			first = d.At
		}
	}
	t.Logf("moved partitions %v: pause %v; p50 %v max %v",
		moved, movedGaps, sdk.Percentile(movedGaps, 0.5), sdk.Percentile(movedGaps, 1))
	t.Logf("unmoved partitions: pause in the same window p50 %v max %v (producer interval 5ms)",
		sdk.Percentile(unmovedGaps, 0.5), sdk.Percentile(unmovedGaps, 1))
	t.Logf("join → newcomer consuming: %v (join call %v)", first.Sub(joined), newcomer.Joined.Sub(joined))
}

// firstFetch is the offset of m's first fetch of p: where its grant
// started it.
func firstFetch(m *sdk.Member, p int32) int64 {
	for _, f := range m.Transport.Fetches() {
		if f.Partition == p {
			return f.Offset
		}
	}
	return -1
}
