package coordinator_test

import (
	"net/http"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestStaleMemberTokensDoNotStarveLeaseHolders: member tokens whose
// member is no longer live (it left, it expired) share one loop-share
// tenant, unknownTenant — the loop answers them unknown_member anyway.
// An outside lease holder's commit (an administrator's lease to a batch
// job: its capability carries no tnt) counted in that same tenant, so
// any client could leave a group, keep its member token (valid until its
// exp) and spin heartbeats with it to spend that tenant's
// tenant_member_rate and places: the lease holder's commits were 429.
// Each outside holder now counts for itself. The attacker spins commits
// too, since commits spend tenant_commit_rate. Fails without: the lease
// holder's commit 429 rate_limited, limit coordinator.tenant_commit_rate
// (coordinator.tenant_member_rate before commits had their own rate).
func TestStaleMemberTokensDoNotStarveLeaseHolders(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.01, 4 // a token a 100 s; the attacker's join mints two
	e.cfg.TenantCommitRate, e.cfg.TenantCommitBurst = 0.01, 4
	e.fill(t, 20)
	h := e.start(t)
	h.call(t, "PUT", "/v1/admin/groups/g/config", e.adminToken, map[string]any{"max_moves_per_second": 1}, 200, nil) // the group
	var lease coordinator.LeaseResponse
	h.call(t, "POST", "/v1/admin/groups/g/partitions/orders/1/lease", e.adminToken,
		coordinator.LeaseRequest{Holder: "backfill", TTLMs: 3_600_000}, 200, &lease)
	e.remember(lease.Capability)

	// The attacker: a client of its own group, left, its member token kept.
	stale := h.join(t, "x", h.clientCredential(t, []string{"x"}, []string{"orders"}), api.JoinRequest{Topics: []string{"orders"}})
	held, ok := stale.grant("orders", 0)
	if !ok {
		t.Fatal("the attacker holds no grant of orders/0")
	}
	h.call(t, "POST", "/v1/groups/x/leave", stale.token, map[string]any{}, 200, nil)
	for i := range 5 { // past the burst
		status, body, _, err := h.try("POST", "/v1/groups/x/heartbeat", stale.token, `{"wait_ms":0}`)
		if err != nil || (status != http.StatusConflict && status != http.StatusTooManyRequests) {
			t.Fatalf("heartbeat %d of a member that left: %v %d %s", i, err, status, body)
		}
		status, body, _, err = h.try("POST", "/v1/groups/x/commit", stale.token,
			api.CommitRequest{Offsets: []api.CommitOffset{{Topic: "orders", Partition: 0, Offset: 0, Capability: held.Capability}}})
		if err != nil || (status != http.StatusConflict && status != http.StatusTooManyRequests) {
			t.Fatalf("commit %d of a member that left: %v %d %s", i, err, status, body)
		}
	}

	status, body, _, err := h.try("POST", "/v1/groups/g/commit", lease.Capability,
		api.CommitRequest{Offsets: []api.CommitOffset{{Topic: "orders", Partition: 1, Offset: 9}}})
	if err != nil || status != http.StatusOK {
		t.Fatalf("the lease holder's commit beside a left member's heartbeats: %v %d %s (limit %q)", err, status, body, limitOf(body))
	}
}
