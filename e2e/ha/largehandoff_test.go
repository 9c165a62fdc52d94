package ha

import (
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/harness"
)

// TestLeaderFailsDuringALargeHandoff: members a and b hold 600
// partitions each when c joins; as soon as the first of the ~400 moving
// partitions is revoked, the leading replica is killed -9 (or paused).
// The replica that takes over finishes every handoff from the log: the
// group settles with three members, every partition owned once, no
// member call refused overloaded, nothing lost, every checker holds (one
// reader per partition, epochs only rise, no committed offset going
// back). Fetches answered 503 (a gateway refusing out_of_sync when the
// takeover outlasts its sync_timeout on a loaded machine) are counted,
// not asserted (log503).
func TestLeaderFailsDuringALargeHandoff(t *testing.T) {
	t.Parallel()
	killOrPause(t, func(t *testing.T, name string, pause bool) {
		group, partitions := "ha-large-handoff-"+name, int32(1200)
		c := startHAWith(t, group, partitions, nil)
		prod, ab := startReading(t, c, group, 10*time.Second, harness.MemberOptions{Name: "a"}, harness.MemberOptions{Name: "b"})
		a, b := ab[0], ab[1]

		since := harness.Now()
		m := c.LaunchMembers(t, harness.MemberOptions{Name: "c", Group: group})[0]
		lead, next, at := failAtFirstRevoke(t, c, since, pause, a, b)
		if err := m.AwaitJoin(harness.Wait); err != nil {
			// The failure cut c's first join off for longer than the
			// SDK's join_timeout (30 s: a starved machine) and the
			// consumer stopped, while the log may hold the join (a
			// member nobody runs, until its session expires). c joins
			// again, as an application does.
			t.Logf("%v; c joins again", err)
			m = c.StartMember(t, harness.MemberOptions{Name: "c", Group: group})
		}
		moved := len(harness.GrantsTo(c.Log.Snapshot(), m.MemberID(), since))
		t.Logf("%s failed %s into the handoff (%d partitions granted to c by then), %s took over after %s",
			lead.Name, time.Duration(at-since).Round(time.Millisecond), moved, next.Name, harness.Since(at).Round(time.Millisecond))
		own := c.WaitSettled(t, group, 3)
		t.Logf("settled after %s: c holds %d", harness.Since(at).Round(time.Millisecond), len(own[m.MemberID()]))
		c.WaitFlowing(t, group, int(partitions)/2)
		bringBack(t, c, lead, pause)
		s := c.Finish(t, prod, group)
		t.Logf("coordinator calls in flight at once, at most: %s", mostInFlight(s.Calls))
		noOverloaded(t, s)
		log503(t, s, at)
	})
}

// failAtFirstRevoke kills -9 (or pauses) the leading replica as soon as
// one of members was told to revoke a partition since since, and
// returns it, the replica that took over and when it failed.
func failAtFirstRevoke(t *testing.T, c *harness.Cluster, since harness.Time, pause bool, members ...*harness.Member) (failed, next *harness.Coordinator, at harness.Time) {
	t.Helper()
	failed = leaderAmong(t, c)
	harness.Eventually(t, harness.Wait, "a handoff begun", func() (bool, string) {
		for _, r := range c.Log.Snapshot().Revokes {
			for _, m := range members {
				if r.At >= since && r.Member == m.MemberID() {
					return true, ""
				}
			}
		}
		return false, "no revoke yet"
	})
	at = harness.Now()
	failReplica(t, failed, pause)
	c.DropSync()
	return failed, leaderAmong(t, c, failed), at
}
