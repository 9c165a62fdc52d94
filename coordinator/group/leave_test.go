package group_test

import (
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/group"
)

// revokeWithSilentGateway: gw1 follows the log, gw2 synced once and went
// silent; a's partition orders/0 is revoked by an admin. It returns the
// revoke's ref.
func revokeWithSilentGateway(t *testing.T, w *world) group.Ref {
	t.Helper()
	w.topics(map[string]int32{"orders": 1})
	w.pollUntilParked("gw1")
	w.pollUntilParked("gw2")
	w.join("g", "a", "orders")
	w.settle("g")
	w.pollUntilParked("gw1")
	w.pollUntilParked("gw2")
	w.gateways["gw2"].parked = 0 // its held poll is gone with it: it never polls again
	ref := w.nextRef()
	w.step(group.RevokePartition{Ref: ref, Group: "g", Topic: "orders", Partition: 0, Reason: "test"})
	w.pollUntilParked("gw1")
	if _, ok := w.replies[ref]; ok {
		t.Fatal("revoke answered while gw2 neither acked nor left")
	}
	return ref
}

// TestGatewayLeaveCompletesAtOnce: a leave makes the silent gateway safe
// in the same step, long before gateway_timeout; it is forgotten (its
// record deleted) and a later poll registers it again.
func TestGatewayLeaveCompletesAtOnce(t *testing.T) {
	w := newWorld(t)
	ref := revokeWithSilentGateway(t, w)
	leave := w.nextRef()
	w.step(group.GatewayLeave{Ref: leave, Gateway: "gw2"})
	mustReply[group.Done](t, w, leave)
	if r := mustReply[group.RevokeReply](t, w, ref); r.Partition != 0 {
		t.Fatalf("revoke reply %+v", r)
	}
	for _, gw := range w.m.Gateways() {
		if gw.ID == "gw2" {
			t.Fatalf("gw2 still known after leaving: %+v", gw)
		}
	}
	again := w.nextRef()
	w.step(group.GatewayLeave{Ref: again, Gateway: "gw2"}) // twice: harmless
	mustReply[group.Done](t, w, again)
	w.gateways["gw2"].seq = 0
	w.pollUntilParked("gw2")
	if len(w.m.Gateways()) != 2 {
		t.Fatalf("gateways after gw2 polled again: %+v", w.m.Gateways())
	}
	w.advance(w.cfg.GatewayTimeout * 2) // timers of the gateway that left fire harmlessly
}

// TestSilenceCountsOnlyWhenGatewaysFence: with silent_gateways: fence a
// silent gateway is safe after gateway_timeout; with serve it is not (it
// may still serve the revoked capability), and the handoff waits for the
// revoked holder's capabilities to expire.
func TestSilenceCountsOnlyWhenGatewaysFence(t *testing.T) {
	w := newWorld(t)
	ref := revokeWithSilentGateway(t, w)
	w.advance(w.cfg.GatewayTimeout + time.Millisecond)
	mustReply[group.RevokeReply](t, w, ref)

	w = newWorld(t, func(c *group.Config) { c.SilentGateways = group.SilentGatewaysServe })
	ref = revokeWithSilentGateway(t, w)
	w.advance(w.cfg.GatewayTimeout + time.Millisecond)
	if _, ok := w.replies[ref]; ok {
		t.Fatal("serve: revoke answered after gateway_timeout of silence")
	}
	if p := w.partition("g", "orders", 0); p.GatewaysSafe {
		t.Fatalf("serve: partition gateway-safe by silence: %+v", p)
	}
	w.advanceTo(w.now.Add(w.cfg.CapabilityLease + w.cfg.Leeway + w.cfg.MaxClockSkew + time.Second))
	mustReply[group.RevokeReply](t, w, ref)
}

func TestSilentGatewaysValidated(t *testing.T) {
	c := group.DefaultConfig()
	c.SilentGateways = "maybe"
	if err := c.Validate(); err == nil {
		t.Fatal("silent_gateways: maybe accepted")
	}
}
