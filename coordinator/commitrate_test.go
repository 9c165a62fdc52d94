package coordinator_test

import (
	"net/http"
	"testing"

	"github.com/capgate/capgate/api"
)

// TestCommitsSpendTheirOwnRate: a tenant's commits spend
// tenant_commit_rate, not tenant_member_rate — the rate its heartbeats
// and the capabilities their answers mint share. Sharing it, an SDK
// committing again as soon as it was answered took about half of a low
// member rate, and a member owed capabilities paid the commits between
// each (e2e/ha TestPacedJoinHoldsEveryPartition). Past the commit burst
// a commit is 429 naming tenant_commit_rate, and the tenant's heartbeats
// are still served; its member rate spent, its commits are still served.
// Fails without the commit rate: the third commit is 200 (the member
// burst), then the heartbeat 429 naming tenant_member_rate.
func TestCommitsSpendTheirOwnRate(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.01, 4 // a token a 100 s; a's join mints one
	e.cfg.TenantCommitRate, e.cfg.TenantCommitBurst = 0.01, 2
	h := e.start(t)
	a := h.join(t, "g", h.clientCredential(t, []string{"g"}, []string{"orders"}), api.JoinRequest{Topics: []string{"orders"}})
	g, ok := a.grant("orders", 0)
	if !ok {
		t.Fatal("member a holds no grant of orders/0")
	}
	commit := func(offset int64) (int, []byte) {
		status, body, _, err := h.try("POST", "/v1/groups/g/commit", a.token,
			api.CommitRequest{Offsets: []api.CommitOffset{{Topic: "orders", Partition: 0, Offset: offset, Capability: g.Capability}}})
		if err != nil {
			t.Fatal(err)
		}
		return status, body
	}
	for i := range 2 {
		if status, body := commit(0); status != http.StatusOK {
			t.Fatalf("commit %d within the tenant's commit burst: %d %s", i, status, body)
		}
	}
	if status, body := commit(0); status != http.StatusTooManyRequests || limitOf(body) != "coordinator.tenant_commit_rate" {
		t.Fatalf("the tenant's third commit past its commit burst: %d %s, want 429 naming coordinator.tenant_commit_rate", status, body)
	}
	for i := range 3 { // the member burst, less the join's capability
		if status, body, _, err := h.try("POST", "/v1/groups/g/heartbeat", a.token, `{"wait_ms":0}`); err != nil || status != http.StatusOK {
			t.Fatalf("heartbeat %d after the commits spent their rate: %v %d %s", i, err, status, body)
		}
	}
	if got := h.metric(t, `capgate_coordinator_tenant_loop_refused_total{limit="tenant_commit_rate"}`); got != 1 {
		t.Errorf("commits refused for the commit rate: %v, want 1", got)
	}
}
