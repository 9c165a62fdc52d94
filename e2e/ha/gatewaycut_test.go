package ha

import (
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/harness"
)

// TestGatewayCutOffDuringTakeover cuts one gateway off from every
// coordinator replica (its proxies to them swallow every byte: a network
// partition, sockets open) while a member joins and three partitions
// move, and kills the leading replica in the middle of that handoff. The
// standby that takes over does not know whether the cut gateway applied
// the fences: it counts it safe only after gateway_timeout of silence
// from the takeover, by when the gateway refused everything itself
// (sync_timeout after its last good poll). So the moved partitions are
// granted late but never read by two members at once: every checker
// holds, the other gateway never answers 503, and once healed the cut
// gateway syncs again and serves.
func TestGatewayCutOffDuringTakeover(t *testing.T) {
	t.Parallel()
	const group = "ha-gw-cut"
	c := startHA(t, group, nil)
	prod := c.StartProducer(t, produceEvery)
	a := c.StartMember(t, harness.MemberOptions{Name: "a", Group: group})
	c.WaitSettled(t, group, 1)
	c.WaitFlowing(t, group, 100)

	cut := c.Gateways()[0]
	since := harness.Now()
	c.Log.AddFault("cut-from-coordinators", cut.ID)
	for _, p := range cut.Proxies {
		p.Blackhole()
	}
	b := c.StartMember(t, harness.MemberOptions{Name: "b", Group: group})
	moving := c.WaitRevoked(t, a.MemberID(), since, 3)
	killed, next, at := killLeader(t, c)
	t.Logf("%s cut off, %s killed in the handoff of %v, %s took over", cut.ID, killed.Name, moving, next.Name)
	own := c.WaitSettled(t, group, 2)
	for _, k := range moving {
		if !slices.Contains(own[b.MemberID()], k.Partition) {
			t.Errorf("%s owned by %v after the takeover, want b", k, own)
		}
	}
	c.WaitFlowing(t, group, 100)
	c.Log.AddFault("heal", cut.ID)
	for _, p := range cut.Proxies {
		p.Heal()
	}
	cut.WaitReady(t, harness.Wait)
	killed.Restart(t)
	c.WaitFlowing(t, group, 100)
	s := c.Finish(t, prod, group)
	// The cut gateway refuses 503 out_of_sync once it could not sync for
	// sync_timeout: that is its promise. The other one never may.
	no503Besides(t, s, cut, at)
}

// TestGatewayCutFromTheLeaderOnly cuts one gateway off from the leading
// replica alone (its proxy to the leader swallows every byte; the
// standbys it still reaches answer not_leader, naming a leader it cannot
// reach) while a second member joins and three partitions move. The
// gateway cannot sync, so it refuses everything itself once sync_timeout
// passed (503 out_of_sync, and the SDK reads through the other gateway);
// the leader, not hearing from it, counts it safe after gateway_timeout
// and completes the handoff. Every checker holds — the gateway's polls
// the standbys answered are no sign of life to the leader (before the
// harness told them apart, this grant was reported unsafe) — the other
// gateway never answers 503, and once healed the cut one syncs and serves
// again.
func TestGatewayCutFromTheLeaderOnly(t *testing.T) {
	t.Parallel()
	const group = "ha-gw-cut-leader"
	c := startHA(t, group, nil)
	prod := c.StartProducer(t, produceEvery)
	a := c.StartMember(t, harness.MemberOptions{Name: "a", Group: group})
	c.WaitSettled(t, group, 1)
	c.WaitFlowing(t, group, 100)

	lead := leaderAmong(t, c)
	cut := c.Gateways()[0]
	since := harness.Now()
	c.Log.AddFault("cut-from-leader", cut.ID)
	cut.Proxies[lead.Index].Blackhole()
	b := c.StartMember(t, harness.MemberOptions{Name: "b", Group: group})
	moving := c.WaitRevoked(t, a.MemberID(), since, 3)
	own := c.WaitSettled(t, group, 2)
	for _, k := range moving {
		if !slices.Contains(own[b.MemberID()], k.Partition) {
			t.Errorf("%s owned by %v after the handoff, want b", k, own)
		}
	}
	standby := slices.ContainsFunc(c.Log.Snapshot().SyncPolls, func(p harness.SyncPoll) bool {
		return p.Gateway == cut.ID && p.Arrived >= since && p.NotLeader
	})
	if !standby {
		t.Errorf("%s polled no standby while cut from the leader: the test proves nothing about them", cut.ID)
	}
	c.WaitFlowing(t, group, 100)
	c.Log.AddFault("heal", cut.ID)
	cut.Proxies[lead.Index].Heal()
	cut.WaitReady(t, harness.Wait)
	c.WaitFlowing(t, group, 100)
	s := c.Finish(t, prod, group)
	no503Besides(t, s, cut, since)
}

// no503Besides is no503 for the fetches every gateway but gw answered.
func no503Besides(t *testing.T, s harness.Snapshot, gw *harness.Gateway, since harness.Time) {
	t.Helper()
	var other harness.Snapshot
	for _, f := range s.ClientFetches {
		if f.Gateway != gw.URL {
			other.ClientFetches = append(other.ClientFetches, f)
		}
	}
	no503(t, other, since)
}

// TestGatewayRestartHoldingRevocations stops a handoff where every
// gateway applied the moved partitions' fences but no ack reached the
// leader (the SyncTaps hold them), then kills one gateway (-9) and the
// leader, and restarts the gateway: it comes back with an empty view and
// must not serve the old holder's capabilities — it refuses everything
// until its first sync with the standby that took over, whose snapshot
// carries the fences. The handoff completes under the standby; a's
// fenced capabilities are refused at both gateways, every checker
// holds, and the gateway that stayed up never answers 503.
func TestGatewayRestartHoldingRevocations(t *testing.T) {
	t.Parallel()
	const group = "ha-gw-restart"
	c := startHA(t, group, nil)
	prod := c.StartProducer(t, produceEvery)
	a := c.StartMember(t, harness.MemberOptions{Name: "a", Group: group, PrintSecrets: true})
	c.WaitSettled(t, group, 1)
	c.WaitFlowing(t, group, 100)

	releaseA := c.HoldFor(a, harness.BeforeGatewayAck, group)
	defer releaseA()
	started := harness.Now()
	b := c.StartMember(t, harness.MemberOptions{Name: "b", Group: group})
	moving := c.WaitRevoked(t, a.MemberID(), started, 3)
	c.WaitStep(t, harness.BeforeGatewayAck, a.MemberID(), moving, started)
	fenced := a.Capabilities()
	gw := c.Gateways()[0]
	gw.Kill()
	killed, next, at := killLeader(t, c)
	gw.Restart(t)
	releaseA()
	gw.WaitReady(t, harness.Wait)
	t.Logf("%s killed holding the fences of %v unacknowledged, %s killed, %s took over, %s back", gw.ID, moving, killed.Name, next.Name, gw.ID)

	own := c.WaitSettled(t, group, 2)
	for _, k := range moving {
		if !slices.Contains(own[b.MemberID()], k.Partition) {
			t.Errorf("%s owned by %v after the takeover, want b", k, own)
		}
		mustBeRefused(t, c, k.Partition, fenced[k.Partition], "a's fenced")
	}
	c.WaitFlowing(t, group, 100)
	killed.Restart(t)
	s := c.Finish(t, prod, group)
	// The restarted gateway answers 503 not_ready until its first sync:
	// that is its promise. The other one never may.
	no503Besides(t, s, gw, at)
}

// TestGatewayCutFromTheLeaderMidHandoff is TestGatewayCutFromTheLeaderOnly
// with the cut landing in the middle of the handoff: every gateway
// applied the moved partitions' fences, no ack reached the leader (the
// SyncTaps held them, then drop them), and one gateway is cut from the
// leader alone at that moment — its ack never arrives. The other
// gateway's ack does; the old holder releases; the leader counts the
// silent gateway safe after gateway_timeout and completes the handoff.
// The cut gateway refuses everything itself once sync_timeout passed,
// the other never answers 503, every checker holds (one reader per
// partition), and healed, the cut one syncs and serves again.
func TestGatewayCutFromTheLeaderMidHandoff(t *testing.T) {
	t.Parallel()
	const group = "ha-gw-cut-mid-handoff"
	c := startHA(t, group, nil)
	prod := c.StartProducer(t, produceEvery)
	a := c.StartMember(t, harness.MemberOptions{Name: "a", Group: group})
	c.WaitSettled(t, group, 1)
	c.WaitFlowing(t, group, 100)

	lead := leaderAmong(t, c)
	cut := c.Gateways()[0]
	releaseA := c.HoldFor(a, harness.BeforeGatewayAck, group)
	since := harness.Now()
	b := c.StartMember(t, harness.MemberOptions{Name: "b", Group: group})
	moving := c.WaitRevoked(t, a.MemberID(), since, 3)
	c.WaitStep(t, harness.BeforeGatewayAck, a.MemberID(), moving, since)
	c.Log.AddFault("cut-from-leader", cut.ID)
	cut.Proxies[lead.Index].Blackhole()
	cutAt := harness.Now()
	c.DropSync()
	releaseA()
	own := c.WaitSettled(t, group, 2)
	for _, k := range moving {
		if !slices.Contains(own[b.MemberID()], k.Partition) {
			t.Errorf("%s owned by %v after the handoff, want b", k, own)
		}
	}
	t.Logf("the handoff completed %s after the cut (gateway_timeout %s)", harness.Since(cutAt).Round(time.Millisecond), haTiming().GatewayTimeout)
	c.WaitFlowing(t, group, 100)
	c.Log.AddFault("heal", cut.ID)
	cut.Proxies[lead.Index].Heal()
	cut.WaitReady(t, harness.Wait)
	c.WaitFlowing(t, group, 100)
	s := c.Finish(t, prod, group)
	no503Besides(t, s, cut, since)
}
