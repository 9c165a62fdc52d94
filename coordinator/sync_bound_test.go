package coordinator_test

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// gatewayIDList lists the gateways the admin endpoint shows.
func gatewayIDList(t *testing.T, h *harness) []string {
	t.Helper()
	var ids []string
	for _, gw := range gateways(t, h) {
		ids = append(ids, gw.ID)
	}
	return ids
}

// revokeStillWaiting requires the admin revoke of orders/0 (answering on
// revoked) to be waiting for a gateway's ack after what happened.
func revokeStillWaiting(t *testing.T, h *harness, revoked <-chan coordinator.RevokeResponse, what string) {
	t.Helper()
	if p := partitionView(t, h, "orders", 0); p.State != "revoking" || p.GatewaysSafe {
		t.Fatalf("after %s the partition is %+v, want revoking and not gateway-safe", what, p)
	}
	select {
	case r := <-revoked:
		t.Fatalf("revoke answered %+v after %s", r, what)
	default:
	}
}

// refusedGateway requires a poll naming id to be refused with 409
// limit_exceeded naming groups.limits.gateways.
func refusedGateway(t *testing.T, h *harness, id string) {
	t.Helper()
	status, body, _ := h.do(t, "GET", "/v1/sync?gateway="+id+"&wait_ms=0", h.env.syncToken, nil)
	d := errorDetails(t, body)
	if status != 409 || errorCode(t, body) != api.CodeLimitExceeded ||
		d["limit"] != "coordinator.groups.limits.gateways" || d["max"] != float64(h.env.cfg.Groups.Limits.Gateways) {
		t.Fatalf("poll as new gateway %s: %d %s, want 409 limit_exceeded naming groups.limits.gateways", id, status, body)
	}
}

// TestGatewayIDsBoundedOverHTTP: the attack is a sync-token holder
// naming fresh gateway ids. Past groups.limits.gateways each is refused
// 409 limit_exceeded and nothing changes: the admin view lists the same
// gateways, a revoke waiting for a known gateway's ack keeps waiting
// (refusals make nothing safe), and that gateway still polls and its ack
// answers the revoke. Once a known gateway is silent longer than
// gateway_timeout (safe for every fence already) a new id takes its place.
func TestGatewayIDsBoundedOverHTTP(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.Groups.Limits.Gateways = 2
	e.cfg.Groups.GatewayTimeout = time.Minute // silence decides only when the test jumps the clock
	var skip atomic.Int64
	h := e.start(t, coordinator.WithClock(func() time.Time { return time.Now().Add(time.Duration(skip.Load())) }))
	gw1, gw2 := newGateway(h, "gw1"), newGateway(h, "gw2")
	registered := gw2.poll(t, 0, 0)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	a := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	old, _ := a.grant("orders", 0)
	gw1.run(200)
	defer gw1.halt()

	revoked := revokeInBackground(h, "/v1/admin/groups/g/partitions/orders/0/revoke")
	fence := gw1.waitFor(t, "the revoke's fence", fenceAbove("orders", 0, old.Epoch))
	eventually(t, func() string {
		for _, gw := range gateways(t, h) {
			if gw.ID == "gw1" && gw.Acked < fence.Seq {
				return "gw1 has not acknowledged the fence"
			}
		}
		return ""
	})
	for _, id := range []string{"gw3", "random-1", "random-2"} {
		refusedGateway(t, h, id)
	}
	if ids := gatewayIDList(t, h); !slices.Equal(ids, []string{"gw1", "gw2"}) {
		t.Fatalf("gateways after refused polls: %v", ids)
	}
	revokeStillWaiting(t, h, revoked, "refused polls")
	if n := h.metric(t, `capgate_coordinator_join_limit_refusals_total{limit="gateways"}`); n != -1 {
		t.Fatalf("refused sync polls counted as join refusals: %v", n)
	}
	gw2.poll(t, registered.Seq, 0) // a known gateway is never refused
	gw2.poll(t, fence.Seq, 100)    // and its ack decides
	if r := <-revoked; r.Epoch == 0 {
		t.Fatal("revoke not answered after gw2 acknowledged")
	}

	skip.Add(int64(e.cfg.Groups.GatewayTimeout + time.Second)) // gw2 stopped without leaving
	eventually(t, func() string {                              // gw1 polled since the jump; gw2 is silent
		for _, gw := range gateways(t, h) {
			if gw.Silent != (gw.ID == "gw2") {
				return fmt.Sprintf("%s silent: %t", gw.ID, gw.Silent)
			}
		}
		return ""
	})
	newGateway(h, "gw3").poll(t, 0, 0)
	if ids := gatewayIDList(t, h); !slices.Equal(ids, []string{"gw1", "gw3"}) {
		t.Fatalf("gateways after gw3 took silent gw2's place: %v", ids)
	}
	refusedGateway(t, h, "gw2") // back as a new id while gw1 and gw3 are live
	e.checkLogs(t)
}
