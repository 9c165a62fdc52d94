package coordinator_test

import (
	"testing"

	"github.com/capgate/capgate/api"
)

// TestForgedCommitCapabilitiesSpendTheBudget is redteam14 #7: a commit's
// offsets each carry a capability, and those were verified without the
// address's auth-failure budget (and before the tenant's rate is asked):
// a member spinning commits whose capability has a forged signature (a
// real kid and claims, so each is a signature check, never cached) made
// the coordinator check a signature per request for ever, where forged
// bearers are answered 429 unchecked past auth_failure_burst. Now past
// the budget such a commit is 429 without its capability checked.
func TestForgedCommitCapabilitiesSpendTheBudget(t *testing.T) {
	const burst = 3
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.AuthFailuresPerSecond, e.cfg.AuthFailureBurst = 0.01, burst // nothing refills during the test
	h := e.start(t)
	a := h.join(t, "g", h.clientCredential(t, []string{"g"}, []string{"orders"}), api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"orders"}})
	g, ok := a.grant("orders", 0)
	if !ok {
		t.Fatal("no grant of orders/0")
	}
	attacker := h.fromAddr("127.0.0.2") // the member's holder is known at its own address, which has a share past the budget
	commit := func(i int) (int, []byte) {
		status, body, _, err := attacker.try("POST", "/v1/groups/g/commit", a.token, api.CommitRequest{Offsets: []api.CommitOffset{
			{Topic: "orders", Partition: 0, Offset: 0, Capability: forgedSignature(g.Capability, i)}}})
		if err != nil {
			t.Fatal(err)
		}
		return status, body
	}
	for i := range burst {
		if status, body := commit(i); status != 401 {
			t.Fatalf("a commit with forged capability %d: %d %s, want 401", i, status, body)
		}
	}
	for i := burst; i < burst+3; i++ {
		if status, body := commit(i); status != 429 || errorCode(t, body) != api.CodeRateLimited {
			t.Fatalf("a commit with forged capability %d past the address's budget of %d: %d %s, want 429 unchecked", i, burst, status, body)
		}
	}
	if n := h.metric(t, "capgate_coordinator_auth_failures_total"); n != burst {
		t.Fatalf("%v failed verifications, want %d (the rest never checked)", n, burst)
	}
}
