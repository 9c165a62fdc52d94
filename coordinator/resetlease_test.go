package coordinator_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestOffsetResetOfAnOutsideLease (newuser3 #6): PUT …/offset on a
// partition leased to an outside holder ended the lease without a word.
// It is 409 conflict naming the holder, until and the two ways on
// (revoke first, or force), and nothing changes; with force:true the
// reset ends the lease and its answer says so (lease_ended). The lease's
// capability is then fenced: the holder's commit is refused.
func TestOffsetResetOfAnOutsideLease(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	e.fill(t, 20)
	h := e.start(t)
	h.call(t, "PUT", "/v1/admin/groups/g/config", e.adminToken, map[string]any{"max_moves_per_second": 1}, 200, nil)
	var lease coordinator.LeaseResponse
	h.call(t, "POST", "/v1/admin/groups/g/partitions/orders/1/lease", e.adminToken,
		coordinator.LeaseRequest{Holder: "backfill", TTLMs: 3_600_000}, 200, &lease)
	e.remember(lease.Capability)
	commit := func(offset int64) int {
		status, _, _ := h.do(t, "POST", "/v1/groups/g/commit", lease.Capability,
			map[string]any{"offsets": []map[string]any{{"topic": "orders", "partition": 1, "offset": offset}}})
		return status
	}
	if status := commit(9); status != 200 {
		t.Fatalf("the lease holder's commit: %d", status)
	}

	path := "/v1/admin/groups/g/partitions/orders/1/offset"
	status, b, _ := h.do(t, "PUT", path, e.adminToken, map[string]any{"to": "earliest"})
	var refusal struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Lease   struct {
				Holder string `json:"holder"`
				Until  string `json:"until"`
			} `json:"lease"`
		} `json:"error"`
	}
	if status != 409 || json.Unmarshal(b, &refusal) != nil || refusal.Error.Code != string(api.CodeConflict) ||
		refusal.Error.Lease.Holder != "backfill" || refusal.Error.Lease.Until != lease.Until ||
		!strings.Contains(refusal.Error.Message, `leased to "backfill"`) || !strings.Contains(refusal.Error.Message, "Revoke the partition first") ||
		!strings.Contains(refusal.Error.Message, "force") {
		t.Fatalf("reset of a leased partition: %d %s", status, b)
	}
	d := h.describe(t, "g")
	for _, p := range d.Partitions {
		if p.Partition == 1 && (p.Lease == nil || p.Lease.Holder != "backfill" || p.Committed == nil || *p.Committed != 9) {
			t.Fatalf("a refused reset changed orders/1: %+v", p)
		}
	}
	if status := commit(10); status != 200 {
		t.Fatalf("the lease holder's commit after the refused reset: %d", status)
	}

	var out coordinator.OffsetResetResponse
	h.call(t, "PUT", path, e.adminToken, map[string]any{"to": "earliest", "force": true}, 200, &out)
	if out.Offset != 0 || out.LeaseEnded == nil || out.LeaseEnded.Holder != "backfill" || !out.LeaseEnded.Outside || out.LeaseEnded.Until != lease.Until {
		t.Fatalf("forced reset: %+v", out)
	}
	for _, p := range h.describe(t, "g").Partitions {
		if p.Partition == 1 && (p.Lease != nil || p.Committed == nil || *p.Committed != 0) {
			t.Fatalf("orders/1 after the forced reset: %+v", p)
		}
	}
	if status := commit(11); status == 200 {
		t.Fatal("the ended lease's capability still commits")
	}
	// A partition without an outside lease needs no force, and its answer
	// names no lease.
	var plain coordinator.OffsetResetResponse
	h.call(t, "PUT", "/v1/admin/groups/g/partitions/orders/0/offset", e.adminToken, map[string]any{"offset": 0}, 200, &plain)
	if plain.LeaseEnded != nil {
		t.Fatalf("reset without a lease: %+v", plain)
	}
}
