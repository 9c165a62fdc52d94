package coordinator_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestGatewayLeave: a revoke waits for a registered gateway that stopped
// polling; requests that are not the sync credential (no token, the
// admin token, a member's token, a forged one) cannot make it leave —
// 401, and the revoke still waits; the sync credential's leave answers
// the revoke at once (long before gateway_timeout), and a later poll
// with the same id registers the gateway again with a snapshot.
func TestGatewayLeave(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 4})
	e.cfg.Groups.GatewayTimeout = time.Minute // silence never decides here
	h := e.start(t)
	gw1, gw2 := newGateway(h, "gw1"), newGateway(h, "gw2")
	gw2.poll(t, 0, 0) // registered, then silent
	gw1.run(200)
	defer gw1.halt()
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	a := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	old, _ := a.grant("orders", 1)

	start := time.Now()
	revoked := revokeInBackground(h, "/v1/admin/groups/g/partitions/orders/1/revoke")
	fence := gw1.waitFor(t, "the revoke's fence", fenceAbove("orders", 1, old.Epoch))

	forged := "not-" + e.syncToken
	for _, token := range []string{"", e.adminToken, a.token, forged, creds} { // none, admin, member, forged, client credential
		h.expectError(t, "POST", "/v1/sync/leave?gateway=gw2", token, nil, 401, api.CodeUnauthorized)
	}
	h.expectError(t, "POST", "/v1/sync/leave", e.syncToken, nil, 400, api.CodeBadRequest)
	h.expectError(t, "GET", "/v1/sync/leave?gateway=gw2", e.syncToken, nil, 405, api.CodeMethodNotAllowed)
	eventually(t, func() string { // gw1 acknowledged the fence; only gw2 holds the revoke back
		for _, gw := range gateways(t, h) {
			if gw.ID == "gw1" && gw.Acked < fence.Seq {
				return "gw1 has not acknowledged yet"
			}
		}
		return ""
	})
	if p := partitionView(t, h, "orders", 1); p.State != "revoking" || p.GatewaysSafe {
		t.Fatalf("after refused leaves the partition is %+v, want revoking and not gateway-safe", p)
	}
	select {
	case r := <-revoked:
		t.Fatalf("revoke answered %+v while gw2 is registered and silent", r)
	default:
	}

	h.call(t, "POST", "/v1/sync/leave?gateway=gw2", e.syncToken, nil, 200, nil)
	r := <-revoked
	if took := time.Since(start); r.Epoch != old.Epoch+1 || took >= e.cfg.Groups.GatewayTimeout {
		t.Fatalf("revoke answer %+v after %s, want epoch %d well before gateway_timeout", r, took, old.Epoch+1)
	}
	for _, gw := range gateways(t, h) {
		if gw.ID == "gw2" {
			t.Fatalf("gw2 still listed after it left: %+v", gw)
		}
	}
	h.call(t, "POST", "/v1/sync/leave?gateway=gw2", e.syncToken, nil, 200, nil) // twice: harmless
	if again := gw2.poll(t, 0, 0); !again.Reset {
		t.Fatalf("poll after leaving: %+v, want a reset snapshot", again)
	}
	found := false
	for _, gw := range gateways(t, h) {
		found = found || gw.ID == "gw2"
	}
	if !found {
		t.Fatal("gw2 not registered again by its poll after leaving")
	}
	e.checkLogs(t)
}

// TestGatewayLeaveDurable: a gateway that left is not restored after a
// restart (nothing waits for it), one that did not is.
func TestGatewayLeaveDurable(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	newGateway(h, "stays").poll(t, 0, 0)
	newGateway(h, "goes").poll(t, 0, 0)
	h.call(t, "POST", "/v1/sync/leave?gateway=goes", e.syncToken, nil, 200, nil)
	h.stop(t)
	h = e.start(t)
	var ids []string
	for _, gw := range gateways(t, h) {
		ids = append(ids, gw.ID)
	}
	if len(ids) != 1 || ids[0] != "stays" {
		t.Fatalf("gateways after a restart: %v, want [stays]", ids)
	}
}

func gateways(t *testing.T, h *harness) []coordinator.GatewayView {
	t.Helper()
	var out coordinator.GatewaysResponse
	h.call(t, "GET", "/v1/admin/gateways", h.env.adminToken, nil, 200, &out)
	return out.Gateways
}

func partitionView(t *testing.T, h *harness, topic string, partition int32) coordinator.PartitionView {
	t.Helper()
	for _, p := range h.describe(t, "g").Partitions {
		if p.Topic == topic && p.Partition == partition {
			return p
		}
	}
	t.Fatalf("no partition %s/%d", topic, partition)
	return coordinator.PartitionView{}
}

// revokeInBackground sends an admin revoke; its answer (zero unless 200)
// arrives on the channel.
func revokeInBackground(h *harness, path string) <-chan coordinator.RevokeResponse {
	out := make(chan coordinator.RevokeResponse, 1)
	go func() {
		var r coordinator.RevokeResponse
		if status, b, _, err := h.try("POST", path, h.env.adminToken, coordinator.RevokeRequest{Reason: "test"}); err == nil && status == 200 {
			_ = json.Unmarshal(b, &r)
		}
		out <- r
	}()
	return out
}
