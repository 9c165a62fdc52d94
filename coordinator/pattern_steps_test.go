package coordinator_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/topicpattern"
)

// TestSlowPatternJoinsRefusedAndPaid: a `*` tenant's join whose
// topic_pattern fails slowly on every name — `(.?){60}x`, within the
// cost bound, 1.1 s of a core per match over 10,000 topics, each join's
// (redteam18; the match runs in the join's goroutine since patloop, but
// nothing bounded it) — is refused 400 naming limits.topic_pattern_steps,
// nothing joined; the work its refusal took is charged to the tenant's
// rate, so its next join waits on it (429 here, the rate being a token
// every 1,000 s), while another tenant joins with a pattern at once.
func TestSlowPatternJoinsRefusedAndPaid(t *testing.T) {
	topics := map[string]int32{}
	for i := range 10 {
		topics[fmt.Sprintf("team-%04d.service-events.orders-v%d", i, i%7)] = 1
	}
	e := newEnv(t, topics)
	e.cfg.Groups.Limits.TopicPatternSteps = 30_000 // the attack takes ~6,000 a name; `team-000[0-4]\..*` ~100
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.001, 20
	h := e.start(t)
	credA := h.clientCredential(t, []string{"*"}, []string{"*"})
	credB := h.clientCredential(t, []string{"*"}, []string{"*"})
	if m := h.join(t, "ga", credA, api.JoinRequest{TopicPattern: `team-000[0-4]\..*`, SessionTimeoutMs: 300_000}); len(m.grants) != 5 {
		t.Fatalf("A's pattern join: %d grants, want the 5 topics it matches", len(m.grants))
	}
	status, body, _ := h.do(t, "POST", "/v1/groups/gb/join", credA, api.JoinRequest{TopicPattern: `(.?){60}x`, SessionTimeoutMs: 300_000})
	var refusal struct {
		Error struct {
			Limit string `json:"limit"`
		} `json:"error"`
	}
	if status != http.StatusBadRequest || json.Unmarshal(body, &refusal) != nil || refusal.Error.Limit != "coordinator.groups.limits.topic_pattern_steps" {
		t.Fatalf("A's join with (.?){60}x: %d %.300s, want 400 naming coordinator.groups.limits.topic_pattern_steps", status, body)
	}
	if status, body, _ := h.do(t, "GET", "/v1/admin/groups/gb", e.adminToken, nil); status != http.StatusNotFound {
		t.Fatalf("the refused join left group gb: %d %.300s", status, body)
	}
	status, body, _ = h.do(t, "POST", "/v1/groups/gc/join", credA, api.JoinRequest{TopicPattern: `team-000[0-4]\..*`, SessionTimeoutMs: 300_000})
	if status != http.StatusTooManyRequests || limitOf(body) != "coordinator.tenant_member_rate" {
		t.Fatalf("A's join after the refused match's work was charged: %d %.300s, want 429 naming coordinator.tenant_member_rate", status, body)
	}
	if m := h.join(t, "gd", credB, api.JoinRequest{TopicPattern: `team-000[0-4]\..*`, SessionTimeoutMs: 300_000}); len(m.grants) != 5 {
		t.Fatalf("B's pattern join beside A: %d grants, want 5", len(m.grants))
	}
}

// TestTopicListAsAlternationJoins: a user subscribing to a list of
// topics by a pattern — `(orders-events|payments-events|…)`, 30 names,
// 480 bytes — costs about its length (no repetition expands it), so it
// is within topic_pattern_cost counted beyond its length (it was refused
// 400 topic_pattern_cost, the cost bound being for short patterns that
// expand); its matching is a few steps a name, far within
// topic_pattern_steps.
func TestTopicListAsAlternationJoins(t *testing.T) {
	words := []string{"orders", "payments", "invoices", "refunds", "shipments", "returns", "customers", "accounts", "ledger", "audit",
		"inventory", "pricing", "catalog", "reviews", "sessions", "clicks", "searches", "carts", "checkouts", "coupons",
		"loyalty", "notices", "emails", "texts", "pushes", "fraud", "risks", "identity", "payouts", "settles"}
	topics := map[string]int32{}
	var names []string
	for _, w := range words {
		names = append(names, w+"-events")
		topics[w+"-events"] = 1
		topics[w+"-events-dlq"] = 1
	}
	pattern := "(" + strings.Join(names, "|") + ")"
	if c := topicpattern.Cost(pattern); c <= topicpattern.DefaultMaxCost || len(pattern) > topicpattern.DefaultMaxBytes {
		t.Fatalf("the pattern: %d bytes, cost %d: want within the length bound and a cost past %d", len(pattern), c, topicpattern.DefaultMaxCost)
	}
	e := newEnv(t, topics)
	h := e.start(t)
	cred := h.clientCredential(t, []string{"*"}, []string{"*"})
	if m := h.join(t, "g", cred, api.JoinRequest{TopicPattern: pattern, SessionTimeoutMs: 300_000}); len(m.grants) != len(words) {
		t.Fatalf("a join with the %d-name alternation: %d grants, want %d", len(words), len(m.grants), len(words))
	}
	// A short pattern that expands is refused as before.
	status, body, _ := h.do(t, "POST", "/v1/groups/g2/join", cred, api.JoinRequest{TopicPattern: `(.?){250}`, SessionTimeoutMs: 300_000})
	if status != http.StatusBadRequest || !strings.Contains(string(body), "topic_pattern_cost") {
		t.Fatalf("a join with (.?){250}: %d %.300s, want 400 naming topic_pattern_cost", status, body)
	}
}
