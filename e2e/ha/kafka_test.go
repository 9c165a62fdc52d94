package ha

import (
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/store"
)

// moveLeaders moves the leadership of every partition of topics to the
// next broker (of three) and moves every transaction and group
// coordinator (kfake's RehashCoordinators): what a broker's restart or a
// preferred-leader election does to the replicas' log and the gateways'
// fetches.
func moveLeaders(t *testing.T, c *harness.Cluster, topics map[string]int32) {
	t.Helper()
	kc := c.Kafka.Cluster()
	c.Log.AddFault("kafka-leaders-moved", "")
	for topic, n := range topics {
		for p := range n {
			from := kc.LeaderFor(topic, p)
			if from < 0 {
				t.Fatalf("%s/%d has no leader", topic, p)
			}
			if err := kc.MoveTopicPartition(topic, p, (from+1)%3); err != nil {
				t.Fatalf("move %s/%d: %v", topic, p, err)
			}
		}
	}
	kc.RehashCoordinators()
}

// TestStateLogLeaderMoves moves the leader of the replicas' state and
// snapshot topics, of the data topic, and every transaction coordinator
// to other brokers — once while a handoff is in flight, once at rest,
// then a third member joins through the moved log; then the broker
// leading the state log is removed and a fourth member joins and leaves. The leading
// replica's transactions, the standbys' tails and the gateways' fetches
// follow the new leaders: the handoffs complete, no fetch is answered
// 503, nothing is lost, every checker holds. (Whether the leader keeps
// leading or a standby takes over is the replicas' timing; either is
// safe, and the test logs which.)
func TestStateLogLeaderMoves(t *testing.T) {
	t.Parallel()
	const group = "ha-log-moves"
	c := startHA(t, group, nil)
	topics := map[string]int32{c.Topic(): c.Partitions()}
	for _, topic := range store.DefaultKafkaConfig().Topics() {
		topics[topic] = store.DefaultKafkaConfig().Partitions
	}
	prod := c.StartProducer(t, produceEvery)
	a := c.StartMember(t, harness.MemberOptions{Name: "a", Group: group})
	c.WaitSettled(t, group, 1)
	c.WaitFlowing(t, group, 100)
	lead := leaderAmong(t, c)

	since := harness.Now()
	c.StartMember(t, harness.MemberOptions{Name: "b", Group: group})
	c.WaitRevoked(t, a.MemberID(), since, 3)
	moveLeaders(t, c, topics)
	c.WaitSettled(t, group, 2)
	c.WaitFlowing(t, group, 100)
	moveLeaders(t, c, topics)
	c.WaitFlowing(t, group, 100)
	c.StartMember(t, harness.MemberOptions{Name: "c", Group: group})
	c.WaitSettled(t, group, 3)
	c.WaitFlowing(t, group, 100)
	// The broker leading the state log goes (its listener closes, its
	// partitions get new leaders among the other two).
	kc := c.Kafka.Cluster()
	state := store.DefaultKafkaConfig().Topic
	gone := kc.LeaderFor(state, 0)
	c.Log.AddFault("kafka-broker-removed", fmt.Sprint(gone))
	if err := kc.RemoveNode(gone); err != nil {
		t.Fatal(err)
	}
	t.Logf("broker %d (leading %s/0) removed; now led by %d", gone, state, kc.LeaderFor(state, 0))
	d := c.StartMember(t, harness.MemberOptions{Name: "d", Group: group})
	c.WaitSettled(t, group, 4)
	c.WaitFlowing(t, group, 100)
	d.Close(t)
	c.WaitSettled(t, group, 3)
	now := leaderAmong(t, c)
	t.Logf("%s led before the moves, %s leads after; role changes: %v", lead.Name, now.Name, c.RoleChanges())
	s := c.Finish(t, prod, group)
	no503(t, s, since)
}

// TestLeaderKilledAfterTheStateLogsBrokerWent: the broker leading the
// replicas' state log goes away (its listener closes, its partitions led
// by the other two) while a handoff is in flight; the handoff completes
// and a third member joins through the moved log; then the leading
// replica is killed -9, so the standby that takes over fences and reads
// the log through the two brokers left. The group settles each time, no
// fetch is answered 503, nothing is lost, every checker holds. (kfake
// cannot bring the broker back faithfully: re-added under its id and
// port, the state log's leader epoch read as reset to 0 — "lost
// records" — and topic creation answered NOT_CONTROLLER, so the
// standbys' takeovers failed for seconds: not a restart any real broker
// does.)
func TestLeaderKilledAfterTheStateLogsBrokerWent(t *testing.T) {
	t.Parallel()
	const group = "ha-broker-gone"
	c := startHA(t, group, nil)
	prod := c.StartProducer(t, produceEvery)
	a := c.StartMember(t, harness.MemberOptions{Name: "a", Group: group})
	c.WaitSettled(t, group, 1)
	c.WaitFlowing(t, group, 100)

	kc := c.Kafka.Cluster()
	state := store.DefaultKafkaConfig().Topic
	gone := kc.LeaderFor(state, 0)
	since := harness.Now()
	c.StartMember(t, harness.MemberOptions{Name: "b", Group: group})
	c.WaitRevoked(t, a.MemberID(), since, 3)
	c.Log.AddFault("kafka-broker-removed", fmt.Sprint(gone))
	if err := kc.RemoveNode(gone); err != nil {
		t.Fatal(err)
	}
	c.WaitSettled(t, group, 2)
	c.WaitFlowing(t, group, 100)
	c.StartMember(t, harness.MemberOptions{Name: "c", Group: group})
	c.WaitSettled(t, group, 3)
	t.Logf("broker %d (leading %s/0) removed; now led by %d", gone, state, kc.LeaderFor(state, 0))
	killed, next, at := killLeader(t, c)
	t.Logf("%s killed, %s took over after %s", killed.Name, next.Name, harness.Since(at).Round(time.Millisecond))
	c.WaitFlowing(t, group, 200)
	killed.Restart(t)
	s := c.Finish(t, prod, group)
	no503(t, s, since)
}
