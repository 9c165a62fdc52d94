package coordinator_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// rogueGateway registers gateway id with a first poll (after=0), then
// polls /v1/sync as id in a loop, every poll with the same after: a
// sync-token holder that never acknowledges anything — after=0 (a reset
// snapshot each time), or, stale, the seq of that first answer. It
// returns that after and the func that stops it.
func rogueGateway(t *testing.T, h *harness, id string, stale bool) (after uint64, stop func()) {
	t.Helper()
	g := newGateway(h, id)
	if first := g.poll(t, 0, 0); stale {
		after = first.Seq
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond) // the attacker's pace
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				_, _ = g.tryPoll(after, 50)
			}
		}
	}()
	return after, func() { close(quit); <-done }
}

// lagEnv is a coordinator whose clock the test jumps: gateway_timeout a
// minute, sessions and capabilities 5 minutes, so only the jumps decide.
func lagEnv(t *testing.T) (*env, *harness, *atomic.Int64) {
	t.Helper()
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.Groups.GatewayTimeout = time.Minute
	e.cfg.Groups.SessionTimeout = 5 * time.Minute
	e.cfg.CapabilityLease = 5 * time.Minute
	skip := new(atomic.Int64)
	h := e.start(t, coordinator.WithClock(func() time.Time { return time.Now().Add(time.Duration(skip.Load())) }))
	return e, h, skip
}

func gatewayView(t *testing.T, h *harness, id string) coordinator.GatewayView {
	t.Helper()
	for _, gw := range gateways(t, h) {
		if gw.ID == id {
			return gw
		}
	}
	t.Fatalf("gateway %s not listed", id)
	return coordinator.GatewayView{}
}

// lagWarnings counts the WARN entries reporting gateway id lagging.
func lagWarnings(e *env, id string) int { return gatewayWarnings(e, "gateway lagging", id) }

// gatewayWarnings counts the log entries whose message holds snippet and
// that name gateway id.
func gatewayWarnings(e *env, snippet, id string) int {
	n := 0
	for _, entry := range e.logs.FilterMessageSnippet(snippet).All() {
		if entry.ContextMap()["gateway"] == id {
			n++
		}
	}
	return n
}

// TestNonAckingPollerOverHTTP is the attack over HTTP: a sync-token
// holder polls GET /v1/sync as gateway "rogue" and never acknowledges —
// after=0, or a stale after from before the revoke. Before the lag rule
// it counted live and unacknowledged as long as it polled, and the admin
// revoke (like every handoff of every group) waited for the revoked
// capability to expire (capability_lease, 5 min here). Now: while the
// revoke's fence is younger than gateway_timeout the revoke waits (the
// honest gateway acknowledged; rogue did not); once the clock passes
// gateway_timeout the revoke is answered though rogue keeps polling, the
// admin view shows rogue lagging (gw1 not), the WARN names it once, and
// capgate_coordinator_gateways_safe_by_lag_total counts it.
func TestNonAckingPollerOverHTTP(t *testing.T) {
	for _, stale := range []bool{false, true} {
		t.Run(fmt.Sprintf("stale=%t", stale), func(t *testing.T) {
			e, h, skip := lagEnv(t)
			gw1 := newGateway(h, "gw1")
			gw1.run(200)
			defer gw1.halt()
			creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
			a := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
			old, _ := a.grant("orders", 0)
			after, stop := rogueGateway(t, h, "rogue", stale)
			defer stop()
			rogue := newGateway(h, "rogue") // a poll of the test's own as rogue: a step at the jumped clock

			revoked := revokeInBackground(h, "/v1/admin/groups/g/partitions/orders/0/revoke")
			fence := gw1.waitFor(t, "the revoke's fence", fenceAbove("orders", 0, old.Epoch))
			eventually(t, func() string {
				if gw := gatewayView(t, h, "gw1"); gw.Acked < fence.Seq {
					return "gw1 has not acknowledged the fence"
				}
				return ""
			})
			revokeStillWaiting(t, h, revoked, "gw1 acknowledged, rogue polls without acknowledging")
			if gw := gatewayView(t, h, "rogue"); gw.Lagging || gw.Silent || gw.UnackedSince == "" {
				t.Fatalf("rogue before gateway_timeout: %+v, want neither lagging nor silent, unacknowledged since", gw)
			}

			skip.Add(int64(e.cfg.Groups.GatewayTimeout - 5*time.Second))
			rogue.poll(t, after, 0)
			revokeStillWaiting(t, h, revoked, "55 s of 60 s")

			skip.Add(int64(6 * time.Second)) // the fence is gateway_timeout old: rogue is safe by lag
			rogue.poll(t, after, 0)
			select {
			case r := <-revoked:
				if r.Epoch != old.Epoch+1 {
					t.Fatalf("revoke answer %+v, want epoch %d", r, old.Epoch+1)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("revoke still waiting past gateway_timeout: a poller that acknowledges nothing stalls it")
			}
			gw, honest := gatewayView(t, h, "rogue"), gatewayView(t, h, "gw1")
			if !gw.Lagging || gw.Silent || gw.Acked != after || gw.UnackedSince == "" || honest.Lagging || honest.UnackedSince != "" {
				t.Fatalf("admin view: rogue %+v, gw1 %+v; want rogue lagging (acked %d), gw1 not", gw, honest, after)
			}
			rogue.poll(t, after, 0)
			if n := h.metric(t, "capgate_coordinator_gateways_safe_by_lag_total"); n != 1 {
				t.Fatalf("capgate_coordinator_gateways_safe_by_lag_total %v, want 1", n)
			}
			if n, other := lagWarnings(e, "rogue"), lagWarnings(e, "gw1"); n != 1 || other != 0 {
				t.Fatalf("lag warnings: rogue %d, gw1 %d; want one for rogue", n, other)
			}
			e.checkLogs(t)
		})
	}
}

// TestAckingGatewayHoldsRevokeOverHTTP: the lag rule does not answer for
// a gateway that acknowledges. gw2 took the revoke's fence and takes its
// time applying it (its next poll acknowledges only what it had before):
// the revoke waits though gateway_timeout has nearly passed, and is
// answered the moment gw2 acknowledges the fence.
func TestAckingGatewayHoldsRevokeOverHTTP(t *testing.T) {
	e, h, skip := lagEnv(t)
	gw1, gw2 := newGateway(h, "gw1"), newGateway(h, "gw2")
	gw1.run(200)
	defer gw1.halt()
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	a := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	old, _ := a.grant("orders", 0)
	before := gw2.poll(t, 0, 0)
	before = gw2.poll(t, before.Seq, 100)

	revoked := revokeInBackground(h, "/v1/admin/groups/g/partitions/orders/0/revoke")
	fence := gw2.poll(t, before.Seq, 0) // held until the fence (or sync_wait_max)
	for !fenceAbove("orders", 0, old.Epoch)(fence) {
		fence = gw2.poll(t, before.Seq, 0)
	}
	skip.Add(int64(e.cfg.Groups.GatewayTimeout - 2*time.Second))
	gw2.poll(t, before.Seq, 0) // polling, not yet acknowledging the fence
	revokeStillWaiting(t, h, revoked, "gw2 polled without acknowledging for 58 s of 60 s")
	if gw := gatewayView(t, h, "gw2"); gw.Lagging || gw.Acked != before.Seq {
		t.Fatalf("gw2 %+v, want not lagging, acked %d", gw, before.Seq)
	}
	gw2.poll(t, fence.Seq, 100)
	select {
	case r := <-revoked:
		if r.Epoch != old.Epoch+1 {
			t.Fatalf("revoke answer %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("revoke not answered after gw2 acknowledged the fence")
	}
	if n := h.metric(t, "capgate_coordinator_gateways_safe_by_lag_total"); n != 0 {
		t.Fatalf("capgate_coordinator_gateways_safe_by_lag_total %v, want 0", n)
	}
}
