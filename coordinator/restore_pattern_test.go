package coordinator_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/capgate/capgate/api"
)

// TestMemberRestoredWithoutItsPatternIsToldToRejoin: a restart matches
// each tenant's pattern texts within 4 × topic_pattern_steps in all; a
// member whose text its tenant's budget did not cover keeps the topics of
// the partitions it holds (stale), and one that held none was restored
// with no topics — its heartbeats answered 200 with nothing, no word
// why, until it happened to rejoin. Now its heartbeat is 409
// unknown_member whose details say removed topic_pattern_unrestored
// (what the SDK and the Kafka listener's session take as "join again"),
// and its join gets its topics; tenant B's member, restored within B's
// own budget, heartbeats on with its topics.
func TestMemberRestoredWithoutItsPatternIsToldToRejoin(t *testing.T) {
	topics := map[string]int32{}
	for i := range 200 {
		topics[fmt.Sprintf("team-%04d.service-events", i)] = 1
	}
	e := newEnv(t, topics)
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 1e9, 1_000_000_000
	h := e.start(t)
	credA := h.clientCredential(t, []string{"*"}, []string{"*"})
	credB := h.clientCredential(t, []string{"*"}, []string{"*"})
	// ~60 steps a name: ~12,000 each over the 200 topics, A's ten
	// ~120,000 — past a restore's 4 × 20,000 once the bound is 20,000.
	// Each matches the one topic team-0000...: one of A's members holds
	// its partition, the others none.
	var as []*member
	for i := range 10 {
		as = append(as, h.join(t, "ga", credA, api.JoinRequest{SessionTimeoutMs: 300_000, TopicPattern: fmt.Sprintf(`.*z%02d.*|team-0000\..*`, i)}))
	}
	b := h.join(t, "gb", credB, api.JoinRequest{SessionTimeoutMs: 300_000, TopicPattern: `team-000[0-9]\..*`})
	if len(b.grants) != 10 {
		t.Fatalf("B's join: %d grants, want its 10 topics'", len(b.grants))
	}
	h.stop(t)
	e.cfg.Groups.Limits.TopicPatternSteps = 20_000
	h = e.start(t)
	b.h = h
	for _, m := range as {
		m.h = h
	}

	unrestored := 0
	for _, m := range as {
		status, body, _ := h.do(t, "POST", "/v1/groups/ga/heartbeat", m.token, api.HeartbeatRequest{WaitMs: 0})
		if status == http.StatusOK {
			continue
		}
		var refusal struct {
			Error struct {
				Code    api.Code `json:"code"`
				Removed string   `json:"removed"`
			} `json:"error"`
		}
		if status != http.StatusConflict || json.Unmarshal(body, &refusal) != nil || refusal.Error.Code != api.CodeUnknownMember ||
			refusal.Error.Removed != api.RemovedPatternUnrestored {
			t.Fatalf("heartbeat of A's member %s after the restart: %d %.300s; want 200, or 409 unknown_member removed %s", m.id, status, body, api.RemovedPatternUnrestored)
		}
		unrestored++
		// Removed: what it answers now, and its join gets its topics.
		h.expectError(t, "POST", "/v1/groups/ga/heartbeat", m.token, api.HeartbeatRequest{WaitMs: 0}, http.StatusConflict, api.CodeUnknownMember)
		var resp api.JoinResponse
		h.call(t, "POST", "/v1/groups/ga/join", credA, api.JoinRequest{SessionTimeoutMs: 300_000, TopicPattern: fmt.Sprintf(`.*z%02d.*|team-0000\..*`, slices.Index(as, m))}, 200, &resp)
		if resp.TopicPatternMatches == nil || *resp.TopicPatternMatches != 1 {
			t.Fatalf("A's member joining again: topic_pattern_matches %v, want 1", resp.TopicPatternMatches)
		}
	}
	if unrestored == 0 || unrestored == len(as) {
		t.Fatalf("%d of A's %d members told they were restored without their topics; want those past A's restore budget", unrestored, len(as))
	}
	b.heartbeat(t, 0)
	for _, mem := range h.describe(t, "gb").Members {
		if mem.TopicPatternStale != "" || mem.TopicPatternMatches == nil || *mem.TopicPatternMatches != 10 {
			t.Fatalf("B's member after the restart: stale %q, %v matches; want its 10 topics", mem.TopicPatternStale, mem.TopicPatternMatches)
		}
	}
}
