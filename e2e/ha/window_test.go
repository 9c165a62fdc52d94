package ha

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
)

// TestLeaderFailsInsideTheJoinWindow: a storm of members joins an empty
// group whose join window (group/window.go; initial_assign_delay 3 s
// here, so the fault lands inside it) holds the first assignment, and
// the leading replica is killed (-9) or paused (SIGSTOP) while it does:
// every member joined (persisted), the opener's join still parked at the
// leader, nobody granted anything. The window is not in the state log:
// the replica that takes over assigns at once. Every member must end up
// with its share of the partitions within seconds — the opener's join
// given up at the dead or silent replica is repeated with its key at the
// next, so no orphan member holds partitions nobody reads — no member
// fails, every checker holds (one reader per partition, committed
// offsets never back, nothing lost) and no fetch is answered 503.
func TestLeaderFailsInsideTheJoinWindow(t *testing.T) {
	t.Parallel()
	for _, pause := range []bool{false, true} {
		name := map[bool]string{false: "kill", true: "pause"}[pause]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			stormIntoFault(t, "ha-window-"+name, pause)
		})
	}
}

func stormIntoFault(t *testing.T, group string, pause bool) {
	const members = 6
	c := startHA(t, group, nil, func(cfg *coordinator.Config) {
		cfg.Groups.InitialAssignDelay, cfg.Groups.InitialAssignDelayMax = 3*time.Second, 20*time.Second
		// As TestZombieLeader: a write in flight at SIGSTOP gets its
		// outcome from the broker (fenced), not from its own timeout.
		cfg.KafkaState.Timeout = 5 * time.Minute
	})
	prod := c.StartProducer(t, produceEvery)
	old := leaderAmong(t, c)
	start := harness.Now()
	var opts []harness.MemberOptions
	for i := range members {
		opts = append(opts, harness.MemberOptions{Name: fmt.Sprintf("m%d", i), Group: group, RequestTimeout: 10 * time.Second})
	}
	joined := c.LaunchMembers(t, opts...)
	harness.Eventually(t, harness.Wait, "every member of the storm joined, nothing granted", func() (bool, string) {
		d, err := c.Describe(group)
		if err != nil {
			return false, err.Error()
		}
		return len(d.Members) >= members, fmt.Sprintf("%d members", len(d.Members))
	})
	if s := c.Log.Snapshot(); len(s.Grants) > 0 {
		t.Fatalf("a grant (%s to %s) before the fault: the window was closed already (the test's premise)", s.Grants[0].Key, s.Grants[0].Consumer)
	}
	since := harness.Now()
	failReplica(t, old, pause)
	next := leaderAmong(t, c, old)
	took := harness.Now().Sub(since)
	c.WaitSettled(t, group, members)
	settled := harness.Now().Sub(since)
	for _, m := range joined {
		m.WaitJoined(t)
	}
	t.Logf("storm of %d joined in %s; %s %s, %s took over after %s; the group settled with %d members %s after the fault",
		members, since.Sub(start).Round(time.Millisecond), old.Name, map[bool]string{false: "killed", true: "paused"}[pause],
		next.Name, took.Round(time.Millisecond), members, settled.Round(time.Millisecond))
	c.WaitFlowing(t, group, 200)
	bringBack(t, c, old, pause)
	c.WaitFlowing(t, group, 100)
	for _, m := range joined {
		if err := m.Err(); err != nil {
			t.Errorf("%s ended: %v", m.Name, err)
		}
	}
	s := c.Finish(t, prod, group)
	no503(t, s, since)
}

// TestLeaderKilledWithMintsDeferred: a member's join into an empty group
// is granted all six partitions, but its tenant's rate
// (tenant_member_rate, burst 1 here) pays for only some of the
// capabilities; the rest wait in the member's news for its next
// heartbeats (mint pacing, coordinator/tenantshare.go paceMints) — news
// that lives only in the leader's memory. The leader is killed -9 before
// any heartbeat carried them (the member's heartbeats are held until
// then). The replica that took over restored the ownership (every
// partition the member's, its capabilities due for renewal at once):
// the member must get a capability for each of its partitions within
// seconds and read them all, with no fetch answered 503, every checker
// holding.
func TestLeaderKilledWithMintsDeferred(t *testing.T) {
	t.Parallel()
	const group = "ha-mints-deferred"
	c, prod, a, first, release := joinWithMintsDeferred(t, group, 20)
	defer release()
	killed, next, at := killLeader(t, c)
	release()
	var got []int32
	harness.Eventually(t, harness.Wait, "a holds a capability for every partition", func() (bool, string) {
		got = first
		for _, g := range c.Log.Snapshot().Grants {
			if g.Member == a.MemberID() && g.At >= at && !slices.Contains(got, g.Key.Partition) {
				got = append(got, g.Key.Partition)
			}
		}
		return len(got) == int(c.Partitions()), fmt.Sprintf("%v", got)
	})
	t.Logf("the join's answer carried partitions %v; %s killed, %s took over, a had all %d %s after the kill",
		first, killed.Name, next.Name, len(got), harness.Since(at).Round(time.Millisecond))
	c.WaitFlowing(t, group, 200)
	killed.Restart(t)
	s := c.Finish(t, prod, group)
	no503(t, s, at)
}

// joinWithMintsDeferred starts the e2e/ha cluster with tenant_member_rate
// rate (burst 1) and a producer, and a member a whose join into the
// empty group group is answered with only some of its six partitions'
// capabilities (first), the rest deferred in its news; its heartbeats
// are held until release, so nothing else reaches it.
func joinWithMintsDeferred(t *testing.T, group string, rate float64) (c *harness.Cluster, prod *harness.Producer, a *harness.Member, first []int32, release func()) {
	t.Helper()
	c = startHA(t, group, nil, func(cfg *coordinator.Config) {
		cfg.TenantMemberRate, cfg.TenantMemberBurst = rate, 1
	})
	prod = c.StartProducer(t, produceEvery)
	a = c.LaunchMembers(t, harness.MemberOptions{Name: "a", Group: group})[0]
	release = a.Hold("heartbeat")
	a.WaitJoined(t)
	first = harness.PartitionsOf(harness.GrantsTo(c.Log.Snapshot(), a.MemberID(), 0))
	if len(first) >= int(c.Partitions()) {
		release()
		t.Fatalf("the join's answer carried all %d partitions: nothing deferred (the test's premise)", len(first))
	}
	return c, prod, a, first, release
}
