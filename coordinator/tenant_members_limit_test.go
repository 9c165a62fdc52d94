package coordinator_test

import (
	"testing"

	"github.com/capgate/capgate/api"
)

// redteam4 #2 over HTTP: one tenant joining member after member filled
// the coordinator's state_bytes, and then another tenant's join was 409.
// With members_per_credential the tenant's 4th member is 409
// limit_exceeded naming the setting and the tenant, and the other tenant
// still joins within the same state budget.
func TestOneTenantCannotFillTheStateBudget(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	l := &e.cfg.Groups.Limits
	l.MembersPerCredential = 3
	l.StateBytes = 20 << 10 // about 7 members in one group, 3 and another tenant's group fit
	e.cfg.JoinRate, e.cfg.JoinBurst = 1000, 1000
	h := e.start(t)
	attacker := h.clientCredential(t, []string{"*"}, []string{"*"})
	victim := h.clientCredential(t, []string{"*"}, []string{"*"})
	req := api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000}
	joined := 0
	var status int
	var body []byte
	for ; joined < 50; joined++ {
		if status, body, _ = h.do(t, "POST", "/v1/groups/flood/join", attacker, req); status != 200 {
			break
		}
	}
	d := errorDetails(t, body)
	if joined != 3 || status != 409 || errorCode(t, body) != api.CodeLimitExceeded ||
		d["limit"] != "coordinator.groups.limits.members_per_credential" || d["max"] != 3.0 || d["tenant"] == nil {
		t.Fatalf("one tenant's joins: %d granted, then %d %s; want 3, then 409 limit_exceeded naming members_per_credential and the tenant",
			joined, status, body)
	}
	if got := h.metric(t, `capgate_coordinator_join_limit_refusals_total{limit="members_per_credential"}`); got != 1 {
		t.Fatalf(`join_limit_refusals_total{limit="members_per_credential"} = %v, want 1 (the refusal counted)`, got)
	}
	if status, body, _ := h.do(t, "POST", "/v1/groups/victim/join", victim, req); status != 200 {
		t.Fatalf("another tenant's join after the flood: %d %s", status, body)
	}
}
