package harness

import (
	"fmt"
	"slices"
	"testing"

	"github.com/capgate/capgate/api"
)

// HandoffStep is a step of a handoff at which a test stops it (and kills
// the coordinator): the SyncTaps hold the sync answers carrying the
// group's fences or the gateways' acks of them, and the old holder's
// commits (its release) are held in its transport.
type HandoffStep string

// The steps, in the order a handoff passes them.
const (
	AfterRevokeSent   HandoffStep = "after-revoke-sent"  // the holder was told, no gateway got the fence
	BeforeGatewayAck  HandoffStep = "before-gateway-ack" // every gateway got the fence, no ack reached the coordinator
	AfterAckNoRelease HandoffStep = "after-ack-before-release"
	AfterReleaseGrant HandoffStep = "after-release-before-grant" // released, gateways not yet safe
)

// HandoffSteps lists every step.
var HandoffSteps = []HandoffStep{AfterRevokeSent, BeforeGatewayAck, AfterAckNoRelease, AfterReleaseGrant}

// HoldFor stops the coming handoff of group away from a at step (every
// coordinator's SyncTap holds); it returns what lets a's commits go.
func (c *Cluster) HoldFor(a *Member, step HandoffStep, group string) (releaseA func()) {
	inGroup := func(f api.Fence) bool { return f.Group == group }
	switch step {
	case AfterRevokeSent:
		for _, tap := range c.Taps {
			tap.HoldAnswers(inGroup)
		}
		return a.Hold("commit")
	case BeforeGatewayAck:
		for _, tap := range c.Taps {
			tap.HoldAcks(inGroup)
		}
		return a.Hold("commit")
	case AfterAckNoRelease:
		return a.Hold("commit")
	default:
		for _, tap := range c.Taps {
			tap.HoldAcks(inGroup)
		}
		return func() {}
	}
}

// SyncHeld is how many sync answers or acks the SyncTaps hold.
func (c *Cluster) SyncHeld() int {
	n := 0
	for _, tap := range c.Taps {
		n += tap.Held()
	}
	return n
}

// DropSync ends every SyncTap's hold, dropping what it held (the
// coordinator it belonged to is gone).
func (c *Cluster) DropSync() {
	for _, tap := range c.Taps {
		tap.Drop()
	}
}

// WaitRevoked waits until member was told to revoke n partitions since
// since and returns them.
func (c *Cluster) WaitRevoked(t testing.TB, member string, since Time, n int) []PartitionKey {
	t.Helper()
	var keys []PartitionKey
	Eventually(t, Wait, fmt.Sprintf("%d revokes to %s", n, member), func() (bool, string) {
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

// WaitStep waits until the handoff of moving away from member reached
// step.
func (c *Cluster) WaitStep(t testing.TB, step HandoffStep, member string, moving []PartitionKey, since Time) {
	t.Helper()
	gateways := len(c.Gateways())
	Eventually(t, Wait, "handoff at step "+string(step), func() (bool, string) {
		s := c.Log.Snapshot()
		if seen := observedRevoking(s, moving, since); seen < len(moving) {
			return false, fmt.Sprintf("coordinator seen revoking %d of %d", seen, len(moving))
		}
		fenced, acked := fenceProgress(s, moving, since)
		held := c.SyncHeld()
		switch step {
		case AfterRevokeSent:
			return held >= gateways && len(fenced) == 0, fmt.Sprintf("%d answers held, fenced %v", held, fenced)
		case BeforeGatewayAck:
			return len(fenced) == gateways && held >= gateways, fmt.Sprintf("fenced %v, %d polls held", fenced, held)
		case AfterAckNoRelease:
			return len(acked) == gateways, fmt.Sprintf("acked %v", acked)
		default:
			n := releases(s, member, moving, since)
			return n == len(moving) && held > 0, fmt.Sprintf("%d of %d released, %d acks held", n, len(moving), held)
		}
	})
}

// observedRevoking counts the moving partitions the coordinator was seen
// revoking since since (the new epoch is persisted).
func observedRevoking(s Snapshot, moving []PartitionKey, since Time) int {
	var seen []PartitionKey
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
func fenceProgress(s Snapshot, moving []PartitionKey, since Time) (fenced, acked []string) {
	complete := map[string]uint64{} // gateway → seq of the answer completing the fences
	for _, gw := range gatewaysOf(s) {
		got := map[PartitionKey]bool{}
		for _, a := range s.SyncAnswers {
			if a.Gateway != gw || a.At < since {
				continue
			}
			for _, f := range a.Fences {
				if k := (PartitionKey{Group: f.Group, Topic: f.Topic, Partition: f.Partition}); slices.Contains(moving, k) {
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

func gatewaysOf(s Snapshot) []string {
	var out []string
	for _, p := range s.SyncPolls {
		if !slices.Contains(out, p.Gateway) {
			out = append(out, p.Gateway)
		}
	}
	return out
}

func covers(got map[PartitionKey]bool, keys []PartitionKey) bool {
	for _, k := range keys {
		if !got[k] {
			return false
		}
	}
	return true
}

// releases counts the moving partitions member released (accepted).
func releases(s Snapshot, member string, moving []PartitionKey, since Time) int {
	var done []PartitionKey
	for _, cm := range s.Commits {
		if cm.Member == member && cm.Release && cm.Accepted() && cm.Sent >= since && slices.Contains(moving, cm.Key) && !slices.Contains(done, cm.Key) {
			done = append(done, cm.Key)
		}
	}
	return len(done)
}

// MaxEpochs is the highest epoch seen for each key: observed at the
// coordinator, granted, or sent as a fence.
func MaxEpochs(s Snapshot, keys []PartitionKey) map[PartitionKey]uint64 {
	out := map[PartitionKey]uint64{}
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
			if k := (PartitionKey{Group: f.Group, Topic: f.Topic, Partition: f.Partition}); slices.Contains(keys, k) {
				out[k] = max(out[k], f.Epoch)
			}
		}
	}
	return out
}

// GrantsTo returns the new grants member received at or after since.
func GrantsTo(s Snapshot, member string, since Time) []Grant {
	var out []Grant
	for _, g := range s.Grants {
		if g.Member == member && !g.Renewal && g.At >= since {
			out = append(out, g)
		}
	}
	return out
}

// PartitionsOf lists the partition numbers of grants, sorted, unique.
func PartitionsOf(grants []Grant) []int32 {
	var out []int32
	for _, g := range grants {
		if !slices.Contains(out, g.Key.Partition) {
			out = append(out, g.Key.Partition)
		}
	}
	slices.Sort(out)
	return out
}
