package ha

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/leader"
	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/internal/stack"
)

// standbys are the running replicas other than lead.
func standbys(c *harness.Cluster, lead *harness.Coordinator) []*harness.Coordinator {
	var out []*harness.Coordinator
	for _, co := range c.Replicas {
		if co != lead && co.Process() != nil {
			out = append(out, co)
		}
	}
	return out
}

// cutStandbys cuts every standby of lead off from Kafka and waits until
// each stood as a candidate (it saw no commit of the leader for a lease)
// — the cut was met. It returns the standbys and when they were cut.
func cutStandbys(t *testing.T, c *harness.Cluster, cut *stack.KafkaCut, lead *harness.Coordinator) ([]*harness.Coordinator, harness.Time) {
	t.Helper()
	others := standbys(c, lead)
	since := harness.Now()
	for _, co := range others {
		c.Log.AddFault("kafka-cut", co.Name)
		cut.Cut(clientID(co.Index))
	}
	for _, co := range others {
		harness.Eventually(t, harness.Wait, co.Name+" stands as a candidate", func() (bool, string) {
			return slices.ContainsFunc(c.RoleChanges(), func(r harness.RoleChange) bool {
				return r.Part == co.Name && r.At >= since && r.To == leader.Candidate.String()
			}), fmt.Sprint(c.RoleChanges())
		})
	}
	return others, since
}

// healStandbys ends the cut of every one of others.
func healStandbys(c *harness.Cluster, cut *stack.KafkaCut, others []*harness.Coordinator) {
	for _, co := range others {
		c.Log.AddFault("kafka-heal", co.Name)
		cut.Heal(clientID(co.Index))
	}
}

// TestStandbysCutFromKafka cuts both standbys off from every broker
// while the leader reaches Kafka: they see no commit, stand as
// candidates, and cannot fence anyone. The leader must go on leading —
// members heartbeat it, gateways sync, no fetch is answered 503 — and
// when the cut heals the standbys follow it again (their promotion fails
// at the healed connections: they never depose a leader that was
// working all along). The standbys' tails caught up: a kill -9 of the
// leader afterwards is an ordinary takeover.
func TestStandbysCutFromKafka(t *testing.T) {
	t.Parallel()
	const group = "ha-standby-cut"
	cut := stack.NewKafkaCut()
	c := startHA(t, group, cut)
	prod := c.StartProducer(t, produceEvery)
	a := c.StartMember(t, harness.MemberOptions{Name: "a", Group: group})
	b := c.StartMember(t, harness.MemberOptions{Name: "b", Group: group})
	c.WaitSettled(t, group, 2)
	c.WaitFlowing(t, group, 100)

	lead := leaderAmong(t, c)
	others, since := cutStandbys(t, c, cut, lead)
	heartbeatsAfter(t, c, harness.Now(), a, b)
	c.WaitFlowing(t, group, 100)
	healStandbys(c, cut, others)
	for _, co := range others {
		harness.Eventually(t, harness.Wait, co.Name+" follows "+lead.Name, func() (bool, string) {
			role, hint, err := roleOf(c, co)
			return err == nil && role == leader.Follower.String() && hint == lead.URL, fmt.Sprintf("%s naming %q (%v)", role, hint, err)
		})
	}
	for _, r := range c.RoleChanges() {
		if r.At >= since && r.Part == lead.Name {
			t.Errorf("the leader, reaching Kafka all along, changed role while its standbys were cut: %+v", r)
		}
	}
	c.WaitFlowing(t, group, 100)
	killed, next, at := killLeader(t, c)
	t.Logf("standbys cut and healed; then %s killed, %s took over", killed.Name, next.Name)
	heartbeatsAfter(t, c, at, a, b)
	c.WaitFlowing(t, group, 100)
	s := c.Finish(t, prod, group)
	no503(t, s, since)
}

// TestLeaderKilledWhileStandbysCut kills the leader (-9) while both
// standbys are cut off from Kafka: nobody can lead until the cut heals.
// The gateways keep serving on the view they have (sync_timeout, 5 s
// here, is longer than the outage) and the members keep their sessions;
// once healed a standby takes over (a first promotion may fail at the
// connections the heal closed; the next lease tries again), members
// heartbeat it, and no fetch was answered 503.
func TestLeaderKilledWhileStandbysCut(t *testing.T) {
	t.Parallel()
	const group = "ha-standby-cut-kill"
	cut := stack.NewKafkaCut()
	c := startHA(t, group, cut)
	prod := c.StartProducer(t, produceEvery)
	a := c.StartMember(t, harness.MemberOptions{Name: "a", Group: group})
	b := c.StartMember(t, harness.MemberOptions{Name: "b", Group: group})
	c.WaitSettled(t, group, 2)
	c.WaitFlowing(t, group, 100)

	lead := leaderAmong(t, c)
	others, since := cutStandbys(t, c, cut, lead)
	lead.Kill(t)
	c.DropSync()
	healed := harness.Now()
	start := time.Now()
	healStandbys(c, cut, others)
	next := leaderAmong(t, c, lead)
	took := time.Since(start)
	heartbeatsAfter(t, c, healed, a, b)
	t.Logf("%s killed with its standbys cut from Kafka; healed, %s led after %s, members heartbeat it after %s",
		lead.Name, next.Name, took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	c.WaitFlowing(t, group, 100)
	lead.Restart(t)
	s := c.Finish(t, prod, group)
	no503(t, s, since)
}

// TestStandbyStoppedWhileCutAfterAFailedTakeover: a standby cut off from
// Kafka stands as a candidate, its takeover fails (the log unreachable),
// and it goes back to following — which waits, a lease at a time, for
// the log it cannot reach. Stopped then (SIGTERM, as at a redeploy or a
// node drain, still cut), it must exit cleanly. Before, the follow gave
// up at the stop with no follower, the leadership loop decided its next
// takeover with none before it saw the stop, and the process panicked on
// its way down (nil pointer in store.Follower.Promote, exit status 2; an
// e2e/ha run with a Kafka broker removed and re-added crashed a replica
// so).
func TestStandbyStoppedWhileCutAfterAFailedTakeover(t *testing.T) {
	t.Parallel()
	const group = "ha-standby-stopped-cut"
	cut := stack.NewKafkaCut()
	c := startHA(t, group, cut)
	lead := leaderAmong(t, c)
	others, _ := cutStandbys(t, c, cut, lead)
	co := others[0]
	// Each attempt to open a follower waits for Kafka (~10 s) before it
	// fails; past the first, the lease since the failed takeover is over.
	harness.Eventually(t, 2*harness.Wait, co.Name+"'s takeover fails and its follow fails once", func() (bool, string) {
		_, after, failed := strings.Cut(co.Process().Tail(), "takeover failed")
		return failed && strings.Contains(after, "follow the state log"), "not yet"
	})
	err := co.Process().Terminate(20 * time.Second)
	healStandbys(c, cut, others)
	if err != nil {
		t.Fatalf("%s stopped while cut after a failed takeover: %v\n%s", co.Name, err, co.Process().Tail())
	}
	t.Logf("%s stopped cleanly", co.Name)
	co.Restart(t)
}
