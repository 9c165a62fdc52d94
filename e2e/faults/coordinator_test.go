package faults

import (
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/harness"
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
	for _, step := range harness.HandoffSteps {
		t.Run(string(step), func(t *testing.T) {
			t.Parallel()
			coordinatorKillAt(t, step)
		})
	}
}

func coordinatorKillAt(t *testing.T, step harness.HandoffStep) {
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

	releaseA := c.HoldFor(a, step, group)
	started := harness.Now()
	b := c.StartMember(t, harness.MemberOptions{Name: "b", Group: group})
	moving := c.WaitRevoked(t, a.MemberID(), started, 2)
	c.WaitStep(t, step, a.MemberID(), moving, started)
	if gs := grantsTo(c.Log.Snapshot(), b.MemberID(), started); len(gs) > 0 {
		t.Fatalf("step %s not reached: b was granted %v before the kill", step, partitionsOf(gs))
	}
	before := harness.MaxEpochs(c.Log.Snapshot(), moving)

	c.Coordinator.Kill(t)
	c.DropSync()
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
