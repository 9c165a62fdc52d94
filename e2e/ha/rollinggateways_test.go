package ha

import (
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/harness"
)

// TestLeaderFailsDuringARollingGatewayRestart: the two gateways are
// restarted one after the other (SIGTERM, then started again), and while
// each is shutting down a member joins and the leading replica fails as
// the handoff to it begins — killed -9 during the first gateway's
// restart, paused during the second's. A gateway that shuts down tells
// the coordinator it is gone, so no handoff waits gateway_timeout for
// it; the replica that takes over finishes the handoffs from the log.
// The group settles each time, nothing is lost, every checker holds (one
// reader per partition, epochs only rise, no committed offset going
// back), no member call is refused overloaded.
func TestLeaderFailsDuringARollingGatewayRestart(t *testing.T) {
	t.Parallel()
	const group, partitions = "ha-rolling-gateways", 600
	c := startHAWith(t, group, partitions, nil)
	prod, members := startReading(t, c, group, 5*time.Second, harness.MemberOptions{Name: "a"}, harness.MemberOptions{Name: "b"})
	for i, g := range c.Gateways() {
		pause := i == 1
		since := harness.Now()
		c.Log.AddFault("stop", g.ID)
		stopped := make(chan error, 1)
		go func() { stopped <- g.Stop() }()
		m := c.LaunchMembers(t, harness.MemberOptions{Name: string(rune('c' + i)), Group: group})[0]
		lead, next, at := failAtFirstRevoke(t, c, since, pause, members...)
		if err := <-stopped; err != nil {
			t.Fatalf("%s: %v", g.ID, err)
		}
		members = append(members, m)
		c.WaitSettled(t, group, len(members))
		t.Logf("%s stopped, %s failed %s after (pause %v), %s took over; settled %s after the fault",
			g.ID, lead.Name, time.Duration(at-since).Round(time.Millisecond), pause, next.Name, harness.Since(at).Round(time.Millisecond))
		g.Restart(t)
		g.WaitReady(t, harness.Wait)
		c.WaitFlowing(t, group, partitions/2)
		bringBack(t, c, lead, pause)
	}
	s := c.Finish(t, prod, group)
	t.Logf("coordinator calls in flight at once, at most: %s", mostInFlight(s.Calls))
	noOverloaded(t, s)
}
