package faults

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/e2e/harness"
)

// killStep is the step of a handoff at which the coordinator dies.
type killStep string

const (
	afterRevokeSent   killStep = "after-revoke-sent"  // the holder was told, no gateway got the fence
	beforeGatewayAck  killStep = "before-gateway-ack" // every gateway got the fence, no ack reached the coordinator
	afterAckNoRelease killStep = "after-ack-before-release"
	afterReleaseGrant killStep = "after-release-before-grant" // released, gateways not yet safe
)

// TestCoordinatorKill9DuringHandoff kills a `capgate coordinator` process
// with SIGKILL at each step of a handoff and restarts it on the same data
// directory. Member a owns all four partitions; b joins, so two move from
// a to b. The test stops the handoff at the step (holding sync answers or
// acks in the SyncTap, or a's commits in its transport), kills the
// coordinator, restarts it and lets everything go. The handoff resumes:
// b gets the moved partitions under epochs never granted before, nothing
// is lost, and every checker holds.
func TestCoordinatorKill9DuringHandoff(t *testing.T) {
	needSignals(t)
	t.Parallel()
	for _, step := range []killStep{afterRevokeSent, beforeGatewayAck, afterAckNoRelease, afterReleaseGrant} {
		t.Run(string(step), func(t *testing.T) {
			t.Parallel()
			coordinatorKillAt(t, step)
		})
	}
}

func coordinatorKillAt(t *testing.T, step killStep) {
	group := "ck-" + string(step)
	timing := harness.DefaultTiming()
	timing.SessionTimeout = 2 * time.Second // room for the restart
	// A held handoff completes anyway after handoff_timeout, or once held
	// acks make the gateways silent for gateway_timeout: room to reach the
	// step and kill on a loaded machine.
	timing.HandoffTimeout, timing.GatewayTimeout, timing.SyncTimeout = 6*time.Second, 6*time.Second, 4*time.Second
	c := harness.Start(t, harness.Options{Partitions: 4, Groups: []string{group}, CoordinatorProcess: true, Binaries: binaries, Timing: timing})
	prod := c.StartProducer(t, produceEvery)
	a := c.StartMember(t, harness.MemberOptions{Name: "a", Group: group})
	waitSettled(t, c, group, 1)
	waitFlowing(t, c, group, 100)

	releaseA := holdFor(c, a, step, group)
	started := harness.Now()
	b := c.StartMember(t, harness.MemberOptions{Name: "b", Group: group})
	moving := waitRevoked(t, c, a.MemberID(), started, 2)
	waitStep(t, c, step, a.MemberID(), moving, started)
	if gs := grantsTo(c.Log.Snapshot(), b.MemberID(), started); len(gs) > 0 {
		t.Fatalf("step %s not reached: b was granted %v before the kill", step, partitionsOf(gs))
	}
	before := maxEpochs(c.Log.Snapshot(), moving)

	c.Coordinator.Kill(t)
	c.Tap.Drop()
	c.Coordinator.Restart(t)
	releaseA()

	own := waitSettled(t, c, group, 2)
	for _, k := range moving {
		if !slices.Contains(own[b.MemberID()], k.Partition) {
			t.Errorf("%s: owned by %v after the restart, want b (%s)", k, own, b.MemberID())
		}
	}
	waitFlowing(t, c, group, 100)
	s := finish(t, c, prod, group)
	for _, k := range moving {
		var got []uint64
		for _, g := range grantsTo(s, b.MemberID(), started) {
			if g.Key == k {
				got = append(got, g.Epoch)
			}
		}
		if len(got) == 0 || got[0] < before[k] {
			t.Errorf("%s: b granted epochs %v, want ≥ %d (the highest epoch before the kill)", k, got, before[k])
		}
		t.Logf("%s: highest epoch before the kill %d, b granted %v", k, before[k], got)
	}
}

// holdFor stops the coming handoff at step: the SyncTap holds the sync
// answers carrying the group's fences, or the gateways' acks of them, and
// a's commits (its release) are held; it returns what lets a's commits go.
func holdFor(c *harness.Cluster, a *harness.Member, step killStep, group string) (releaseA func()) {
	inGroup := func(f api.Fence) bool { return f.Group == group }
	switch step {
	case afterRevokeSent:
		c.Tap.HoldAnswers(inGroup)
		return a.Hold("commit")
	case beforeGatewayAck:
		c.Tap.HoldAcks(inGroup)
		return a.Hold("commit")
	case afterAckNoRelease:
		return a.Hold("commit")
	default:
		c.Tap.HoldAcks(inGroup)
		return func() {}
	}
}

// waitRevoked waits until member was told to revoke n partitions since
// since and returns them.
func waitRevoked(t *testing.T, c *harness.Cluster, member string, since harness.Time, n int) []harness.PartitionKey {
	t.Helper()
	var keys []harness.PartitionKey
	harness.Eventually(t, wait, fmt.Sprintf("%d revokes to %s", n, member), func() (bool, string) {
		keys = keys[:0]
		for _, r := range c.Log.Snapshot().Revokes {
			if r.Member == member && r.At >= since && !slices.Contains(keys, r.Key) {
				keys = append(keys, r.Key)
			}
		}
		return len(keys) >= n, fmt.Sprintf("revoked %v", keys)
	})
	return keys
}

// waitStep waits until the handoff of moving reached step.
func waitStep(t *testing.T, c *harness.Cluster, step killStep, member string, moving []harness.PartitionKey, since harness.Time) {
	t.Helper()
	gateways := len(c.Gateways())
	harness.Eventually(t, wait, "handoff at step "+string(step), func() (bool, string) {
		s := c.Log.Snapshot()
		if seen := observedRevoking(s, moving, since); seen < len(moving) {
			return false, fmt.Sprintf("coordinator seen revoking %d of %d", seen, len(moving))
		}
		fenced, acked := fenceProgress(s, moving, since)
		switch step {
		case afterRevokeSent:
			return c.Tap.Held() >= gateways && len(fenced) == 0, fmt.Sprintf("%d answers held, fenced %v", c.Tap.Held(), fenced)
		case beforeGatewayAck:
			return len(fenced) == gateways && c.Tap.Held() >= gateways, fmt.Sprintf("fenced %v, %d polls held", fenced, c.Tap.Held())
		case afterAckNoRelease:
			return len(acked) == gateways, fmt.Sprintf("acked %v", acked)
		default:
			n := releases(s, member, moving, since)
			return n == len(moving) && c.Tap.Held() > 0, fmt.Sprintf("%d of %d released, %d acks held", n, len(moving), c.Tap.Held())
		}
	})
}

// observedRevoking counts the moving partitions the coordinator was seen
// revoking since since (the new epoch is persisted).
func observedRevoking(s harness.Snapshot, moving []harness.PartitionKey, since harness.Time) int {
	var seen []harness.PartitionKey
	for _, o := range s.Partitions {
		if o.At >= since && o.State == "revoking" && slices.Contains(moving, o.Key) && !slices.Contains(seen, o.Key) {
			seen = append(seen, o.Key)
		}
	}
	return len(seen)
}

// fenceProgress lists the gateways that were answered a fence of a
// moving partition since since, and those that acknowledged fences of
// every moving partition.
func fenceProgress(s harness.Snapshot, moving []harness.PartitionKey, since harness.Time) (fenced, acked []string) {
	complete := map[string]uint64{} // gateway → seq of the answer completing the fences
	for _, gw := range gatewaysOf(s) {
		got := map[harness.PartitionKey]bool{}
		for _, a := range s.SyncAnswers {
			if a.Gateway != gw || a.At < since {
				continue
			}
			for _, f := range a.Fences {
				if k := (harness.PartitionKey{Group: f.Group, Topic: f.Topic, Partition: f.Partition}); slices.Contains(moving, k) {
					got[k] = true
				}
			}
			if len(got) > 0 && !slices.Contains(fenced, gw) {
				fenced = append(fenced, gw)
			}
			if covers(got, moving) {
				complete[gw] = a.Seq
				break
			}
		}
	}
	for _, p := range s.SyncPolls {
		if want, ok := complete[p.Gateway]; ok && p.Forwarded != 0 && p.After >= want && !slices.Contains(acked, p.Gateway) {
			acked = append(acked, p.Gateway)
		}
	}
	return fenced, acked
}

func gatewaysOf(s harness.Snapshot) []string {
	var out []string
	for _, p := range s.SyncPolls {
		if !slices.Contains(out, p.Gateway) {
			out = append(out, p.Gateway)
		}
	}
	return out
}

func covers(got map[harness.PartitionKey]bool, keys []harness.PartitionKey) bool {
	for _, k := range keys {
		if !got[k] {
			return false
		}
	}
	return true
}

// releases counts the moving partitions member released (accepted).
func releases(s harness.Snapshot, member string, moving []harness.PartitionKey, since harness.Time) int {
	var done []harness.PartitionKey
	for _, cm := range s.Commits {
		if cm.Member == member && cm.Release && cm.Accepted() && cm.Sent >= since && slices.Contains(moving, cm.Key) && !slices.Contains(done, cm.Key) {
			done = append(done, cm.Key)
		}
	}
	return len(done)
}

// maxEpochs is the highest epoch seen for each key: observed at the
// coordinator, granted, or sent as a fence.
func maxEpochs(s harness.Snapshot, keys []harness.PartitionKey) map[harness.PartitionKey]uint64 {
	out := map[harness.PartitionKey]uint64{}
	for _, o := range s.Partitions {
		if slices.Contains(keys, o.Key) {
			out[o.Key] = max(out[o.Key], o.Epoch)
		}
	}
	for _, g := range s.Grants {
		if slices.Contains(keys, g.Key) {
			out[g.Key] = max(out[g.Key], g.Epoch)
		}
	}
	for _, a := range s.SyncAnswers {
		for _, f := range a.Fences {
			if k := (harness.PartitionKey{Group: f.Group, Topic: f.Topic, Partition: f.Partition}); slices.Contains(keys, k) {
				out[k] = max(out[k], f.Epoch)
			}
		}
	}
	return out
}
