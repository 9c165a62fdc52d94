package outage

import (
	"context"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/stack"
)

// leaveTiming: short sessions and sync, but a gateway_timeout and a
// capability lease of a minute, so neither a silent gateway nor the old
// holder's expiry can complete a handoff within this test: only the
// gateway's leave can.
func leaveTiming() stack.Timing {
	tm := stack.TestTiming()
	tm.GatewayTimeout, tm.CapabilityLease, tm.HandoffTimeout = time.Minute, time.Minute, 30*time.Second
	return tm
}

// TestHandoffRightAfterGatewayLeaves: a gateway shut down cleanly (Close,
// as on SIGTERM) tells the coordinator it left, so an admin revoke right
// after it — fence, release, grant — completes in round trips, far below
// gateway_timeout; the consumers keep everything (nothing lost) and the
// gateway, started again with the same id, syncs and serves.
func TestHandoffRightAfterGatewayLeaves(t *testing.T) {
	w := startWorld(t, stack.Options{Gateways: 2, Timing: leaveTiming()})
	w.add("m1")
	w.add("m2")
	if _, ok := w.settled(500*time.Millisecond, 30*time.Second); !ok {
		t.Fatal("group never settled")
	}
	gw := w.s.Gateways()[1]
	if err := gw.Stop(); err != nil {
		t.Fatal(err)
	}
	took, err := w.revoke(0)
	if err != nil {
		t.Fatal(err)
	}
	if limit := leaveTiming().GatewayTimeout / 4; took >= limit {
		t.Fatalf("revoke after the gateway left took %s, want well below gateway_timeout (< %s)", took, limit)
	}
	t.Logf("revoke right after a gateway left: %s (gateway_timeout %s)", took, leaveTiming().GatewayTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := gw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := gw.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if took, err = w.revoke(1); err != nil || took >= leaveTiming().GatewayTimeout/4 {
		t.Fatalf("revoke with the gateway back: %s, %v", took, err)
	}
	if _, ok := w.settled(500*time.Millisecond, 30*time.Second); !ok {
		t.Fatal("group never settled again")
	}
	w.prod.Stop()
	if !w.drained(30 * time.Second) {
		t.Fatal("not every acknowledged record was delivered")
	}
	if r := w.analyze("after", time.Time{}, time.Now(), time.Now()); r.Lost != 0 {
		t.Fatalf("lost %d of %d records", r.Lost, r.Produced)
	}
}
