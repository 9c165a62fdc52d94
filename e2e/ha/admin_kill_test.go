package ha

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/internal/stack"
)

// The admin actions below are killed in the middle: the action is
// persisted and its fence reached every gateway, whose acks the SyncTaps
// hold, so the handoff it started has not completed (a revoke and a
// lease are not answered yet, a reset's forced handoff is under way)
// when the leading replica gets kill -9. The standby that takes over
// must finish what the log holds: the old capability stays refused at
// every gateway, the new one is granted at a higher epoch, a reset's
// offset is where the partition restarts.

// adminKillSetup starts the replicas with one member a holding all six
// partitions under a steady stream; its capabilities are kept (replayed
// after they were fenced).
func adminKillSetup(t *testing.T, group string) (*harness.Cluster, *harness.Producer, *harness.Member) {
	t.Helper()
	c := startHA(t, group, nil)
	prod := c.StartProducer(t, produceEvery)
	a := c.StartMember(t, harness.MemberOptions{Name: "a", Group: group, PrintSecrets: true})
	c.WaitSettled(t, group, 1)
	c.WaitFlowing(t, group, 100)
	return c, prod, a
}

// holdAcks makes every SyncTap hold the gateways' acks of group's fences.
func holdAcks(c *harness.Cluster, group string) {
	for _, tap := range c.Taps {
		tap.HoldAcks(func(f api.Fence) bool { return f.Group == group })
	}
}

// adminCall is one admin request sent to one replica, no retry.
type adminCall struct {
	status int
	body   []byte
	err    error
}

// adminOnce sends an admin request to replica co only (the CLI would
// retry at the next one; the test wants the answer of this one) and
// returns where its answer will be.
func adminOnce(c *harness.Cluster, co *harness.Coordinator, method, path string, in any) <-chan adminCall {
	done := make(chan adminCall, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), harness.Wait)
		defer cancel()
		status, body, err := stack.DoJSON(ctx, c.HTTP(), method, co.URL+path, c.AdminToken, in, nil)
		done <- adminCall{status, body, err}
	}()
	return done
}

// notAnswered fails t if the call was answered already.
func notAnswered(t *testing.T, what string, done <-chan adminCall) {
	t.Helper()
	select {
	case r := <-done:
		t.Fatalf("%s answered %d %s before the gateways acknowledged its fence (%v)", what, r.status, r.body, r.err)
	default:
	}
}

// killLeader kills the leading replica, drops what the SyncTaps held and
// returns the killed one and the one that took over.
func killLeader(t *testing.T, c *harness.Cluster) (killed, next *harness.Coordinator, at harness.Time) {
	t.Helper()
	killed = leaderAmong(t, c)
	at = harness.Now()
	killed.Kill(t)
	c.DropSync()
	next = leaderAmong(t, c, killed)
	return killed, next, at
}

// partitionView returns partition p of group as the leading replica
// describes it.
func partitionView(c *harness.Cluster, group string, p int32) (coordinator.PartitionView, error) {
	d, err := c.Describe(group)
	if err != nil {
		return coordinator.PartitionView{}, err
	}
	for _, v := range d.Partitions {
		if v.Topic == c.Topic() && v.Partition == p {
			return v, nil
		}
	}
	return coordinator.PartitionView{}, fmt.Errorf("partition %d not described", p)
}

// mustBeRefused fetches partition p with capability at every gateway and
// fails t unless each answers 409 capability_revoked: a capability the
// log fenced before the kill stays fenced after the takeover.
func mustBeRefused(t *testing.T, c *harness.Cluster, p int32, capability, why string) {
	t.Helper()
	for _, gw := range c.Gateways() {
		status, code := fetchOnce(t, c, gw, p, capability)
		if status != http.StatusConflict || code != string(api.CodeCapabilityRevoked) {
			t.Errorf("%s: %s fetch of partition %d with the capability %s answered %d %s, want 409 %s",
				gw.ID, why, p, why, status, code, api.CodeCapabilityRevoked)
		}
	}
}

// fetchOnce is one fetch of partition p at offset 0 through gateway gw
// with capability; it returns the status and the error code.
func fetchOnce(t *testing.T, c *harness.Cluster, gw *harness.Gateway, p int32, capability string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := fmt.Sprintf("%s/v1/topics/%s/partitions/%d/records?offset=earliest&max_bytes=1024&max_wait_ms=0", gw.URL, c.Topic(), p)
	status, body, err := stack.DoJSON(ctx, c.HTTP(), http.MethodGet, u, capability, nil, nil)
	if err != nil {
		t.Fatalf("%s: fetch: %v", gw.ID, err)
	}
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return status, e.Error.Code
}

func partitionPath(group, topic string, p int32, action string) string {
	return fmt.Sprintf("/v1/admin/groups/%s/partitions/%s/%d/%s", group, topic, p, action)
}

// inFlight is what an admin action on partition p of group left when
// the leader was killed with it in flight.
type inFlight struct {
	old    string                    // a's capability of p before the action
	before coordinator.PartitionView // p before the action
	killed *harness.Coordinator
	at     harness.Time // the kill
}

// killDuringAdmin sends what (method, path, in) about partition p to the
// leading replica with every gateway's ack of group's fences held, waits
// until the fence reached every gateway and the action is not answered,
// kills the leader and returns once a standby took over.
func killDuringAdmin(t *testing.T, c *harness.Cluster, a *harness.Member, group string, p int32, what, method, path string, in any) inFlight {
	t.Helper()
	f := inFlight{old: a.Capabilities()[p]}
	var err error
	if f.before, err = partitionView(c, group, p); err != nil {
		t.Fatal(err)
	}
	key := harness.PartitionKey{Group: group, Topic: c.Topic(), Partition: p}
	holdAcks(c, group)
	started := harness.Now()
	done := adminOnce(c, leaderAmong(t, c), method, path, in)
	c.WaitStep(t, harness.BeforeGatewayAck, a.MemberID(), []harness.PartitionKey{key}, started)
	notAnswered(t, what, done)
	var next *harness.Coordinator
	f.killed, next, f.at = killLeader(t, c)
	r := <-done
	t.Logf("%s killed with the %s in flight (its answer: %d %v), %s took over", f.killed.Name, what, r.status, r.err, next.Name)
	return f
}

// TestLeaderKill9DuringAdminRevoke: an admin revoke of one partition is
// persisted and fenced at every gateway, not answered (acks held), when
// the leader dies. The standby finishes it: the partition is granted
// back at a higher epoch, the revoked capability is refused at every
// gateway, no 503, every checker holds.
func TestLeaderKill9DuringAdminRevoke(t *testing.T) {
	t.Parallel()
	const group = "ha-adm-revoke"
	const p = 0
	c, prod, a := adminKillSetup(t, group)
	f := killDuringAdmin(t, c, a, group, p, "revoke", http.MethodPost, partitionPath(group, c.Topic(), p, "revoke"), coordinator.RevokeRequest{Reason: "chaos5"})
	harness.Eventually(t, harness.Wait, "partition granted back above the revoked epoch", func() (bool, string) {
		v, err := partitionView(c, group, p)
		return err == nil && v.State == "owned" && v.Owner == a.MemberID() && v.Epoch > f.before.Epoch,
			fmt.Sprintf("%+v %v (epoch before %d)", v, err, f.before.Epoch)
	})
	mustBeRefused(t, c, p, f.old, "revoked")
	c.WaitFlowing(t, group, 100)
	f.killed.Restart(t)
	s := c.Finish(t, prod, group)
	no503(t, s, f.at)
}

// TestLeaderKill9DuringAdminLease: an admin lease of one partition to a
// holder outside the group is persisted and fenced at every gateway, not
// answered, when the leader dies. The admin asks again (as the CLI
// does, at the new leader): the lease holder gets a capability above
// every epoch before, which fetches; the member's old one is refused;
// after the lease is revoked the member reads on, nothing lost.
func TestLeaderKill9DuringAdminLease(t *testing.T) {
	t.Parallel()
	const group = "ha-adm-lease"
	const p = 1
	c, prod, a := adminKillSetup(t, group)
	lease := coordinator.LeaseRequest{Holder: "ops-job", TTLMs: 60_000}
	path := partitionPath(group, c.Topic(), p, "lease")
	f := killDuringAdmin(t, c, a, group, p, "lease", http.MethodPost, path, lease)

	var got coordinator.LeaseResponse
	c.MustAdmin(t, http.MethodPost, path, lease, &got)
	if got.Holder != lease.Holder || !got.Outside || got.Capability == "" || got.Epoch <= f.before.Epoch {
		t.Fatalf("lease asked again after the takeover: %+v, want ops-job's capability above epoch %d", got, f.before.Epoch)
	}
	for _, gw := range c.Gateways() {
		if status, code := fetchOnce(t, c, gw, p, got.Capability); status != http.StatusOK {
			t.Errorf("%s: the lease holder's fetch answered %d %s", gw.ID, status, code)
		}
	}
	mustBeRefused(t, c, p, f.old, "leased away")
	c.MustAdmin(t, http.MethodPost, partitionPath(group, c.Topic(), p, "revoke"), coordinator.RevokeRequest{Reason: "lease over"}, nil)
	mustBeRefused(t, c, p, got.Capability, "lease revoked")
	c.WaitSettled(t, group, 1)
	f.killed.Restart(t)
	s := c.Finish(t, prod, group)
	no503(t, s, f.at)
}

// TestLeaderKill9DuringOffsetReset: an admin offset reset of one
// partition is answered (persisted) while its forced handoff is under way
// (acks held) and the holder's commits are held, carrying offsets past
// the reset; then the leader dies. The standby keeps the reset: the
// holder's held commits, sent to it with the fenced epoch, are refused,
// and the partition is granted again at the reset offset — the reset is
// not undone by the crash.
func TestLeaderKill9DuringOffsetReset(t *testing.T) {
	t.Parallel()
	const group = "ha-adm-reset"
	const p = 2
	c, prod, a := adminKillSetup(t, group)
	key := harness.PartitionKey{Group: group, Topic: c.Topic(), Partition: p}
	oldEpoch := harness.MaxEpochs(c.Log.Snapshot(), []harness.PartitionKey{key})[key]

	releaseA := a.Hold("commit")
	defer releaseA()
	var reset coordinator.OffsetResetResponse
	harness.Eventually(t, harness.Wait, "a committed offset to reset to", func() (bool, string) {
		v, err := partitionView(c, group, p)
		if err != nil || v.Committed == nil || *v.Committed == 0 {
			return false, fmt.Sprintf("%+v %v", v, err)
		}
		reset.Offset = *v.Committed
		return true, ""
	})
	holdAcks(c, group)
	resetAt := harness.Now()
	c.MustAdmin(t, http.MethodPut, partitionPath(group, c.Topic(), p, "offset"), coordinator.OffsetResetRequest{Offset: reset.Offset}, &reset)
	c.WaitStep(t, harness.BeforeGatewayAck, a.MemberID(), []harness.PartitionKey{key}, resetAt)
	killed, next, at := killLeader(t, c)
	t.Logf("reset %s to %d, %s killed in its handoff, %s took over", key, reset.Offset, killed.Name, next.Name)
	releaseA()

	var regrant harness.Grant
	harness.Eventually(t, harness.Wait, "the partition granted again after the reset", func() (bool, string) {
		for _, g := range harness.GrantsTo(c.Log.Snapshot(), a.MemberID(), resetAt) {
			if g.Key == key && g.Epoch > oldEpoch {
				regrant = g
				return true, ""
			}
		}
		return false, "not yet"
	})
	if regrant.Offset != reset.Offset {
		t.Errorf("%s granted again at offset %d (epoch %d), want the reset's %d: the reset was undone", key, regrant.Offset, regrant.Epoch, reset.Offset)
	}
	c.WaitFlowing(t, group, 100)
	killed.Restart(t)
	prod.Stop()
	c.WaitDelivered(t, group, harness.Wait)
	s := c.Log.Snapshot()
	// Commits sent after the reset: one already on its way when the
	// commits were held may be accepted before the reset is decided and
	// answered after resetAt (a commit of 16 at epoch 1, answered after a
	// reset to 11, failed this 1 run in 3 of CI) — the reset then wins.
	for _, cm := range s.Commits {
		if cm.Key == key && cm.Epoch <= oldEpoch && cm.Sent >= resetAt && cm.Accepted() {
			t.Errorf("%s: commit of %d at the fenced epoch %d accepted after the reset to %d", key, cm.Offset, cm.Epoch, reset.Offset)
		}
	}
	// The reset moves the committed offset back on purpose (the only way
	// it may): the checkers see that move, and the grant at the reset
	// offset, as a step back. And it moves the partition by force: the
	// holder's release is refused, so the grant waits for the gateways
	// alone, which "grant after safe" (release, leave, death or
	// handoff_timeout) does not model — its gateway half still counts.
	// Every other violation fails the test.
	for _, v := range harness.CheckAll(s, c.Params()) {
		ours := strings.HasPrefix(v.Detail, key.String()+":") && v.At >= resetAt
		if ours && (v.Invariant == harness.InvCommittedForward ||
			v.Invariant == harness.InvGrantAfterSafe && strings.Contains(v.Detail, "neither released, left nor died")) {
			continue
		}
		t.Errorf("invariant violated: %s", v)
	}
	no503(t, s, at)
}
