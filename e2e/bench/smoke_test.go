package bench

import (
	"testing"
	"time"
)

// Smoke tests: every scenario runs with tiny parameters and its result is
// checked for sense (nothing lost, the group settled, every request
// answered), not for speed. The real figures come from the benchmarks.

func TestSmokeRebalance(t *testing.T) {
	for _, proto := range protocols(200 * time.Millisecond) {
		if proto.Name == "kip848-hb5s" {
			continue // seconds per heartbeat: benchmarks only
		}
		t.Run(proto.Name, func(t *testing.T) {
			r := runRebalance(t, smokeRebalance(proto, slowness{}))
			checkRebalance(t, r, 1)
		})
	}
}

func TestSmokeRebalanceSlow(t *testing.T) {
	proto := protocols(0)[len(protocols(0))-1] // capgate
	r := runRebalance(t, smokeRebalance(proto, slowness{Min: 50 * time.Millisecond, Max: 150 * time.Millisecond, Seed: 7}))
	checkRebalance(t, r, 1)
}

func smokeRebalance(proto protocol, slow slowness) rebalanceParams {
	return rebalanceParams{Protocol: proto, Partitions: 4, Members: 1, Interval: 10 * time.Millisecond,
		Baseline: 300 * time.Millisecond, Quiet: 300*time.Millisecond + slow.Max, Settle: 100 * time.Millisecond,
		Timeout: 30 * time.Second, Slow: slow}
}

func checkRebalance(t *testing.T, r rebalanceRun, wantMovedAtLeast int) {
	t.Helper()
	t.Logf("%s: moved %d pause %+v (beyond steady %+v), unmoved beyond steady %+v, stable %v, newcomer %v, produced %d, dups %d",
		r.Params.Protocol.Name, len(r.Moved), r.MovedPause, r.MovedExtra, r.UnmovedExtra, r.JoinToStable, r.NewcomerFirst, r.Produced, r.Duplicates)
	switch {
	case !r.Stable:
		t.Errorf("the group never settled after the join")
	case r.Lost > 0:
		t.Errorf("%d acknowledged records never consumed", r.Lost)
	case r.Produced == 0:
		t.Errorf("nothing produced")
	case len(r.Moved) < wantMovedAtLeast:
		t.Errorf("%d partitions moved, want at least %d", len(r.Moved), wantMovedAtLeast)
	case r.NewcomerFirst < 0:
		t.Errorf("the newcomer consumed nothing")
	}
	if r.Params.Protocol.Kafka == nil && r.Duplicates > 0 {
		t.Errorf("capgate delivered %d records twice", r.Duplicates)
	}
}

func TestSmokeGateway(t *testing.T) {
	e := startOverhead(t, overheadSize{LatencyRecords: 20, ThroughputParts: 2, ThroughputPerPart: 500, ThroughputValueSize: 100})
	for name, do := range map[string]fetchOne{"direct": e.directFetch(false), "gateway": e.gatewayFetch(false), "gateway-raw": e.gatewayFetch(true)} {
		r := openLoop(200, 100*time.Millisecond, 64, do)
		if r.Failed > 0 || r.Sent == 0 {
			t.Errorf("%s: %d of %d failed, first: %v", name, r.Failed, r.Sent, r.FirstFail)
		}
	}
	r := e.runThroughput(t, 1)
	if r.Direct <= 0 || r.Raw <= 0 || r.JSON <= 0 {
		t.Errorf("throughput: %s", r)
	}
}

func TestSmokeRevoke(t *testing.T) {
	r := runRevoke(t, revokeParams{Gateways: 2, Revokes: 5, BulkPartitions: 100})
	t.Log(r)
	if r.BulkFenced != 100 || r.P50 <= 0 {
		t.Errorf("revoke: %s", r)
	}
	// The bulk fence's stages, in the order they happen.
	st := r.BulkStages
	if st.PersistN < 1 || st.Persist <= 0 || st.FirstApplied <= 0 || st.FirstApplied > st.LastApplied ||
		st.LastApplied > r.BulkAcked || st.LastAck <= 0 || st.LastAck > r.BulkAcked {
		t.Errorf("bulk fence stages %+v (answer %v, all acked %v): out of order", st, r.BulkAnswer, r.BulkAcked)
	}
}

func TestSmokeScale(t *testing.T) {
	r := runScale(t, scaleParams{Members: 10, Partitions: 100, Joiners: 4, HeartbeatFor: 100 * time.Millisecond, Timeout: 30 * time.Second})
	t.Logf("%+v", r)
	if r.Stable <= 0 || r.Heartbeats <= 0 {
		t.Errorf("scale: %+v", r)
	}
}
