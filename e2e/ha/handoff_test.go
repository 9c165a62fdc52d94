package ha

import (
	"slices"
	"testing"

	"github.com/capgate/capgate/e2e/harness"
)

// TestLeaderKill9DuringHandoff kills the leading replica (-9) at each
// step of a handoff (harness.HandoffSteps: the SyncTaps hold the fences
// or the acks, the old holder's release is held). Member a owns all six
// partitions; b joins, so three move. A standby takes over from the log,
// the handoff completes under it: b gets the moved partitions at epochs
// never granted before, no 503, nothing lost, every checker holds.
func TestLeaderKill9DuringHandoff(t *testing.T) {
	t.Parallel()
	for _, step := range harness.HandoffSteps {
		t.Run(string(step), func(t *testing.T) {
			t.Parallel()
			leaderKillAt(t, step)
		})
	}
}

func leaderKillAt(t *testing.T, step harness.HandoffStep) {
	group := "hk-" + string(step)
	c := startHA(t, group, nil)
	prod := c.StartProducer(t, produceEvery)
	a := c.StartMember(t, harness.MemberOptions{Name: "a", Group: group})
	c.WaitSettled(t, group, 1)
	c.WaitFlowing(t, group, 100)

	releaseA := c.HoldFor(a, step, group)
	started := harness.Now()
	b := c.StartMember(t, harness.MemberOptions{Name: "b", Group: group})
	moving := c.WaitRevoked(t, a.MemberID(), started, 3)
	c.WaitStep(t, step, a.MemberID(), moving, started)
	if gs := harness.GrantsTo(c.Log.Snapshot(), b.MemberID(), started); len(gs) > 0 {
		t.Fatalf("step %s not reached: b was granted %v before the kill", step, harness.PartitionsOf(gs))
	}
	before := harness.MaxEpochs(c.Log.Snapshot(), moving)

	lead := leaderAmong(t, c)
	killed := harness.Now()
	lead.Kill(t)
	c.DropSync()
	next := leaderAmong(t, c, lead)
	releaseA()
	t.Logf("%s killed at %s, %s took over", lead.Name, step, next.Name)

	own := c.WaitSettled(t, group, 2)
	for _, k := range moving {
		if !slices.Contains(own[b.MemberID()], k.Partition) {
			t.Errorf("%s: owned by %v after the takeover, want b (%s)", k, own, b.MemberID())
		}
	}
	c.WaitFlowing(t, group, 100)
	lead.Restart(t)
	s := c.Finish(t, prod, group)
	for _, k := range moving {
		var got []uint64
		for _, g := range harness.GrantsTo(s, b.MemberID(), started) {
			if g.Key == k {
				got = append(got, g.Epoch)
			}
		}
		if len(got) == 0 || got[0] < before[k] {
			t.Errorf("%s: b granted epochs %v, want ≥ %d (the highest epoch before the kill)", k, got, before[k])
		}
	}
	no503(t, s, killed)
}
