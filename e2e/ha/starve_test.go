package ha

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
)

// TestTakeoverPacedMintsStarveNoPartition: a member's join into an empty
// group owns all six partitions, but its tenant's rate
// (tenant_member_rate 2/s, burst 1; the member's own heartbeats spend
// part of it) pays for a capability every second or so;
// the rest wait in the member's news (paceMints). The leader is killed
// -9 before any heartbeat carried them. The replica that took over
// restored the ownership — every partition due for renewal at once, what
// the member holds unknown to it — and the rate hands the capabilities
// out one by one, slower than a capability_lease of 8 s renews six (a
// deficit: a partition's renewal is due again before the round ends).
// Chosen by urgency (group.PaceNews: a partition with no capability
// known, then the one whose capability ends first), the first six
// capabilities after the takeover cover all six partitions. Chosen in
// partition order, as before, partition 0's renewal came due again
// before the round got further, every time, and the others got none for
// as long as the test ran (the member owning them, nobody reading them):
// this test failed every run (3 of 3 with two busy loops beside, load
// 10-17: partitions 1-5 none in 90 s — 1's capability from the join
// expired too — 15-16 renewals of partition 0). Every checker holds (one reader per
// partition, epochs only rise, nothing lost), and no capability after
// the takeover is below its partition's epoch before it. And the round
// ends within pacedTakeoverMax of the kill: heartbeats answered empty at
// once spent the rate they were waiting for (21-41 s, 3 of 4 of them
// carrying nothing); held for one token, 10-13 s, the member's commits
// spending half the rate; commits on their own rate and a held heartbeat
// paying for every token that comes within its hold, 4-6 s. (No 503 check: the kill tests make it, and at
// load 16 a gateway answered 2 of 837 fetches 503 out_of_sync across
// this takeover, nothing to do with pacing.)
func TestTakeoverPacedMintsStarveNoPartition(t *testing.T) {
	t.Parallel()
	const group = "ha-mints-starve"
	c, prod, a, first, release := joinWithMintsDeferred(t, group, 2)
	defer release()
	before := map[int32]uint64{}
	d, err := c.Describe(group)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Partitions {
		before[p.Partition] = p.Epoch
	}
	killed, next, at := killLeader(t, c)
	release()
	own := c.WaitSettled(t, group, 1)[a.MemberID()]
	after := allHeld(t, c, a, own, at)
	slices.SortStableFunc(after, func(x, y harness.Grant) int { return cmp.Compare(x.At, y.At) })
	var order []int32
	covered := map[int32]bool{}
	needed := 0
	for i, g := range after {
		order = append(order, g.Key.Partition)
		if g.Epoch < before[g.Key.Partition] {
			t.Errorf("partition %d: capability at epoch %d after the takeover, below %d before it", g.Key.Partition, g.Epoch, before[g.Key.Partition])
		}
		if slices.Contains(own, g.Key.Partition) && !covered[g.Key.Partition] {
			covered[g.Key.Partition] = true
			needed = i + 1
		}
	}
	held := after[needed-1].At
	t.Logf("the join's answer carried %v; %s killed, %s took over; capabilities since, in order: %v; the first %s after the kill, all %d owned held %s after it; until then a spent: %s",
		first, killed.Name, next.Name, order, after[0].At.Sub(at).Round(time.Millisecond), len(own), held.Sub(at).Round(time.Millisecond),
		spent(c.Log.Snapshot(), a.MemberID(), at, held))
	if needed > len(own) {
		t.Errorf("%d capabilities after the takeover before each of the %d owned partitions had one (%v): a partition waited behind another's renewal", needed, len(own), order)
	}
	if d := held.Sub(at); d > pacedTakeoverMax {
		t.Errorf("all %d owned partitions held %s after the kill, want at most %s: the member's heartbeats or commits spent the rate the capabilities wait for", len(own), d.Round(time.Millisecond), pacedTakeoverMax)
	}
	killed.Restart(t)
	c.Finish(t, prod, group)
}

// tokens is what a member's requests answered in an interval spent of
// its tenant's rates, per kind: heartbeats answered (Empty of them
// carrying no capability), capabilities handed, and commits accepted.
// Heartbeats and capabilities spend tenant_member_rate a token each;
// commits spent it too before they had tenant_commit_rate.
type tokens struct {
	Heartbeats, Empty, Capabilities, Commits int
	Other                                    map[string]int // calls answered otherwise (a dead or deposed leader's)
}

func (k tokens) String() string {
	return fmt.Sprintf("heartbeats %d (%d without a capability), capabilities %d, commits %d; answered otherwise %v",
		k.Heartbeats, k.Empty, k.Capabilities, k.Commits, k.Other)
}

// spent counts what member's requests answered in (from, to] spent.
func spent(s harness.Snapshot, member string, from, to harness.Time) tokens {
	k := tokens{Other: map[string]int{}}
	carried := map[harness.Time]bool{}
	for _, g := range s.Grants {
		if g.Member == member && g.At > from && g.At <= to {
			carried[g.At] = true
			k.Capabilities++
		}
	}
	for _, c := range s.Calls {
		if c.Member != member || c.Done <= from || c.Done > to {
			continue
		}
		switch {
		case c.Status != 200:
			k.Other[fmt.Sprintf("%s %d", c.Op, c.Status)]++
		case c.Op == "heartbeat":
			k.Heartbeats++
			if !carried[c.Done] {
				k.Empty++
			}
		case c.Op == "commit":
			k.Commits++
		}
	}
	return k
}

// pacedTakeoverMax and pacedJoinMax bound how long a member owning the
// six partitions waits, at tenant_member_rate 2/s (burst 1), until it
// holds a capability for each: after a takeover (the kill), and after
// its join (four owed). Its heartbeats and the capabilities share the
// rate. When a heartbeat's answer could pay for none it was answered
// at once, empty, and the member came straight back with another
// heartbeat, spending another token: 3 of 4 heartbeats carried nothing,
// and the six were held 24.4-41.5 s after the kill and 19.0-32.0 s
// after the join (pace2). Held until a token reserved for one
// capability was the tenant's (group.DeferNews), nearly every heartbeat
// carried one: 10.4-13.4 s after the kill, 7.0-9.0 s after the join —
// but the member's commits (every 100 ms in the harness; the SDK
// commits again once its last commit is answered) spent that rate too,
// about half of it, and each capability cost a heartbeat, a token and
// the commits between. Commits spend tenant_commit_rate now, and a held
// heartbeat pays for every capability whose token comes within its
// hold, not one: BENCHMARKS §9 has the rounds, main beside the branch.
const (
	pacedTakeoverMax = 8 * time.Second
	pacedJoinMax     = 5 * time.Second
)

// allHeld waits until member a was handed a capability since `since` for
// every partition of own, and returns the capabilities handed since.
func allHeld(t *testing.T, c *harness.Cluster, a *harness.Member, own []int32, since harness.Time) []harness.Grant {
	t.Helper()
	var after []harness.Grant
	harness.Eventually(t, 3*harness.Wait, "a is handed a capability for every partition it owns", func() (bool, string) {
		after = after[:0]
		for _, g := range c.Log.Snapshot().Grants {
			if g.Member == a.MemberID() && g.At >= since {
				after = append(after, g)
			}
		}
		var missing []int32
		for _, p := range own {
			if !slices.ContainsFunc(after, func(g harness.Grant) bool { return g.Key.Partition == p }) {
				missing = append(missing, p)
			}
		}
		return len(missing) == 0, fmt.Sprintf("none yet for %v (%d capabilities since)", missing, len(after))
	})
	slices.SortStableFunc(after, func(x, y harness.Grant) int { return cmp.Compare(x.At, y.At) })
	return after
}

// TestPacedJoinHoldsEveryPartition: a member joins an empty group and
// owns all six partitions, its tenant_member_rate 2/s (burst 1); the
// join's answer pays for two capabilities, its heartbeats bring the
// rest. It holds a capability for every partition within pacedJoinMax
// of its join, every checker holding.
func TestPacedJoinHoldsEveryPartition(t *testing.T) {
	t.Parallel()
	const group = "ha-mints-join"
	c := startHA(t, group, nil, func(cfg *coordinator.Config) {
		cfg.TenantMemberRate, cfg.TenantMemberBurst = 2, 1
	})
	prod := c.StartProducer(t, produceEvery)
	a := c.LaunchMembers(t, harness.MemberOptions{Name: "a", Group: group})[0]
	a.WaitJoined(t)
	var joined harness.Time
	for _, call := range c.Log.Snapshot().Calls {
		if call.Op == "join" && call.Member == a.MemberID() && call.Status == 200 {
			joined = call.Done
		}
	}
	own := c.WaitSettled(t, group, 1)[a.MemberID()]
	after := allHeld(t, c, a, own, joined)
	var held harness.Time // the first capability of the last partition to get one
	var next harness.Time // the first capability after the join's answer
	var first []int32     // what the join's answer carried
	for _, g := range after {
		if g.At == joined {
			first = append(first, g.Key.Partition)
		}
		if g.At > joined && next == 0 {
			next = g.At
		}
		if !slices.ContainsFunc(after, func(h harness.Grant) bool { return h.Key.Partition == g.Key.Partition && h.At < g.At }) {
			held = g.At
		}
	}
	t.Logf("the join's answer carried %v; the next capability %s after the join, all %d owned held %s after it; until then a spent: %s",
		first, next.Sub(joined).Round(time.Millisecond), len(own), held.Sub(joined).Round(time.Millisecond), spent(c.Log.Snapshot(), a.MemberID(), joined, held))
	if d := held.Sub(joined); d > pacedJoinMax {
		t.Errorf("all %d owned partitions held %s after the join, want at most %s: the member's heartbeats or commits spent the rate the capabilities wait for", len(own), d.Round(time.Millisecond), pacedJoinMax)
	}
	c.Finish(t, prod, group)
}
