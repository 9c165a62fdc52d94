package ha

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
)

// TestLeaderPausedDuringAdminRevoke: an admin revoke of one partition is
// persisted and fenced at every gateway, its answer waiting for the
// gateways' acks (held), when the leader is paused (SIGSTOP). A standby
// takes over and finishes it from the log. The paused one resumes, is
// fenced at its next write and steps down, answering the revoke it was
// holding: whatever it says must be true — the revoke was applied and
// is durable, so an error must say it may have been applied, never
// that it failed and should be retried as if nothing happened.
func TestLeaderPausedDuringAdminRevoke(t *testing.T) {
	t.Parallel()
	const group = "ha-adm-revoke-paused"
	const p = 0
	// A write in flight at SIGSTOP gets its outcome from the broker
	// (fenced), not from its own timeout (as TestZombieLeader).
	c := startHA(t, group, nil, func(cfg *coordinator.Config) { cfg.KafkaState.Timeout = 5 * time.Minute })
	prod := c.StartProducer(t, produceEvery)
	a := c.StartMember(t, harness.MemberOptions{Name: "a", Group: group, PrintSecrets: true})
	c.WaitSettled(t, group, 1)
	c.WaitFlowing(t, group, 100)
	before, err := partitionView(c, group, p)
	if err != nil {
		t.Fatal(err)
	}
	key := harness.PartitionKey{Group: group, Topic: c.Topic(), Partition: p}
	holdAcks(c, group)
	started := harness.Now()
	zombie := leaderAmong(t, c)
	done := adminOnce(c, zombie, http.MethodPost, partitionPath(group, c.Topic(), p, "revoke"), coordinator.RevokeRequest{Reason: "chaos8"})
	c.WaitStep(t, harness.BeforeGatewayAck, a.MemberID(), []harness.PartitionKey{key}, started)
	notAnswered(t, "revoke", done)

	since := harness.Now()
	zombie.Pause(t)
	c.DropSync()
	next := leaderAmong(t, c, zombie)
	harness.Eventually(t, harness.Wait, "partition granted back above the revoked epoch", func() (bool, string) {
		v, err := partitionView(c, group, p)
		return err == nil && v.State == "owned" && v.Owner == a.MemberID() && v.Epoch > before.Epoch,
			fmt.Sprintf("%+v %v (epoch before %d)", v, err, before.Epoch)
	})
	resumed := harness.Now()
	zombie.Resume(t)
	why := stepDown(t, c, zombie, resumed)
	r := <-done
	t.Logf("%s paused with the revoke in flight, %s took over; resumed, it stepped down (%s) and answered the revoke %d %s %v",
		zombie.Name, next.Name, why.Reason, r.status, r.body, r.err)
	if r.err == nil && r.status != http.StatusOK {
		var body api.ErrorBody
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatalf("the revoke's answer is no error body: %s", r.body)
		}
		if body.Error.Details["applied"] != "unknown" {
			t.Errorf("the revoke, applied and durable, was answered %d %s: an error must say it may have been applied (details.applied = unknown)", r.status, r.body)
		}
	}
	c.WaitFlowing(t, group, 100)
	s := c.Finish(t, prod, group)
	no503(t, s, since)
}
