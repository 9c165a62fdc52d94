package coordinator_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/capgate/capgate/api"
)

// refusal sends a request and requires status, code and exactly message;
// it returns the error's details. The test goes on after a mismatch, so
// one run lists every refusal that reads wrong.
func (h *harness) refusal(t *testing.T, method, path, token string, body any, status int, code api.Code, message string) map[string]any {
	t.Helper()
	got, b, _ := h.do(t, method, path, token, body)
	var out api.ErrorBody
	if err := json.Unmarshal(b, &out); err != nil || got != status || out.Error.Code != code || out.Error.Message != message {
		t.Errorf("%s %s %v:\n got %d %.600s\nwant %d %s %q", method, path, body, got, b, status, code, message)
	}
	return out.Error.Details
}

// TestMemberRevokeOfAnUnknownGroupIsNotFound (redteam4 #9): POST
// /v1/admin/groups/nosuch/members/x/revoke answered 409 unknown_member,
// where every other admin route naming a group answers 404 not_found
// "unknown group". A member the existing group does not hold stays 409
// unknown_member, and says which group.
func TestMemberRevokeOfAnUnknownGroupIsNotFound(t *testing.T) {
	e := newEnv(t, map[string]int32{"demo": 1})
	h := e.start(t)
	h.refusal(t, "POST", "/v1/admin/groups/nosuch/members/x/revoke", e.adminToken, nil, 404, api.CodeNotFound, `unknown group "nosuch"`)
	cred := h.clientCredential(t, []string{"g"}, []string{"demo"})
	h.join(t, "g", cred, api.JoinRequest{Topics: []string{"demo"}})
	h.refusal(t, "POST", "/v1/admin/groups/g/members/x/revoke", e.adminToken, nil, 409, api.CodeUnknownMember, `revoke: group "g" has no member "x" (never joined, left, expired, or its revocation — at least capability_lease — ended)`)
}

// TestRevokedMemberIsUnknownOnEveryRoute (redteam4 #9): after
// revoke-member, the member's token got 409 unknown_member on heartbeat
// and commit but 401 unauthorized on a rejoin, with one message. The
// member is gone (its token verifies; it names nobody): 409
// unknown_member on every route, a rejoin with it included, as the
// OpenAPI's join lists it and the reject table means it (NeedsRejoin:
// join again with a client credential) — and that join is answered.
func TestRevokedMemberIsUnknownOnEveryRoute(t *testing.T) {
	e := newEnv(t, map[string]int32{"demo": 1})
	h := e.start(t)
	cred := h.clientCredential(t, []string{"g"}, []string{"demo"})
	m := h.join(t, "g", cred, api.JoinRequest{Topics: []string{"demo"}})
	h.call(t, "POST", "/v1/admin/groups/g/members/"+m.id+"/revoke", e.adminToken, nil, 200, nil)
	const gone = "member token refused: member revoked by an administrator: join again with a client credential"
	h.refusal(t, "POST", "/v1/groups/g/heartbeat", m.token, nil, 409, api.CodeUnknownMember, gone)
	h.refusal(t, "POST", "/v1/groups/g/commit", m.token, api.CommitRequest{Offsets: []api.CommitOffset{{Topic: "demo", Partition: 0, Offset: 1}}},
		409, api.CodeUnknownMember, gone)
	h.refusal(t, "POST", "/v1/groups/g/leave", m.token, nil, 409, api.CodeUnknownMember, gone)
	h.refusal(t, "POST", "/v1/groups/g/join", m.token, api.JoinRequest{MemberID: m.id, Topics: []string{"demo"}}, 409, api.CodeUnknownMember, gone)
	if again := h.join(t, "g", cred, api.JoinRequest{Topics: []string{"demo"}}); again.id == m.id {
		t.Fatalf("the join after the revoke made no new member: %s", again.id)
	}
}

// TestOperatorTokenAsJoinCredential (redteam4 #9): a join with
// $CAPGATE_ADMIN_TOKEN read "client credential refused: ocap: malformed
// token: 3 dot-separated segments (header.claims.signature) expected,
// got 1". The coordinator knows its own secrets (their digests): 401
// saying it is the admin token (or a sync token) and what a join takes.
// Neither token appears in the logs (env.checkLogs, at cleanup).
func TestOperatorTokenAsJoinCredential(t *testing.T) {
	e := newEnv(t, map[string]int32{"demo": 1})
	h := e.start(t)
	e.remember(e.adminToken, e.syncToken)
	join := api.JoinRequest{Topics: []string{"demo"}}
	h.refusal(t, "POST", "/v1/groups/g/join", e.adminToken, join, 401, api.CodeUnauthorized,
		"this is the admin token: joins take a client credential (capgate admin client-credential mints one)")
	h.refusal(t, "POST", "/v1/groups/g/join", e.syncToken, join, 401, api.CodeUnauthorized,
		"this is a sync token: joins take a client credential (capgate admin client-credential mints one)")
	// Another opaque string is still the malformed credential it is.
	h.refusal(t, "POST", "/v1/groups/g/join", "not-a-token", join, 401, api.CodeUnauthorized,
		"client credential refused: ocap: malformed token: 3 dot-separated segments (header.claims.signature) expected, got 1")
}

// TestGroupsPerCredentialRefusalSaysHowPlacesComeBack (redteam4 #9):
// "created 2 groups that still exist" did not say how to get a place
// back. The 409 names the setting and says it: a group without commits
// is forgotten empty_group_ttl after it is left empty, one holding
// commits after offsets_retention (with their values), or an admin
// deletes it. The other groups_per_credential refusal (groups the
// tenant has members in) says a place comes back when they leave.
func TestGroupsPerCredentialRefusalSaysHowPlacesComeBack(t *testing.T) {
	e, clock := creatorEnv(t, 10) // groups_per_credential 2, empty_group_ttl 11m, offsets_retention 22m
	h := e.start(t, clock.option())
	a := h.clientCredential(t, []string{"a-*"}, []string{"*"})
	req := api.JoinRequest{Topics: []string{"orders"}}
	for _, g := range []string{"a-0", "a-1"} {
		m := h.join(t, g, a, req)
		h.call(t, "POST", "/v1/groups/"+g+"/leave", m.token, api.LeaveRequest{}, 200, nil)
	}
	d := h.refusal(t, "POST", "/v1/groups/a-2/join", a, req, 409, api.CodeLimitExceeded,
		`join: the credential's tenant "`+tenantOf(t, a)+`" created 2 groups that still exist (coordinator.groups.limits.groups_per_credential): `+
			"a place comes back when one of them is forgotten — one without committed offsets 11m0s after it is left empty (coordinator.groups.limits.empty_group_ttl), "+
			"one holding committed offsets 22m0s after it is left empty (coordinator.groups.limits.offsets_retention) — or an admin deletes it (capgate admin group delete GROUP)")
	if d["limit"] != "coordinator.groups.limits.groups_per_credential" || d["counted"] != "groups_created" {
		t.Errorf("details %v", d)
	}

	b := h.clientCredential(t, []string{"*"}, []string{"*"})
	h.join(t, "a-0", b, req)
	h.join(t, "a-1", b, req)
	h.refusal(t, "POST", "/v1/groups/a-2/join", b, req, 409, api.CodeLimitExceeded,
		`join: the credential's tenant "`+tenantOf(t, b)+`" has members in 2 groups (coordinator.groups.limits.groups_per_credential): `+
			"a place comes back when its members of one of them leave or their sessions time out")
}

// tenantOf is the tenant of an admin-minted credential: its jti.
func tenantOf(t *testing.T, credential string) string {
	t.Helper()
	jti, _ := claimsOf(t, credential)["jti"].(string)
	return jti
}

// TestAdminClientRepeatedPatternsMintedOnce (redteam4 #9): POST
// /v1/admin/clients minted ["a","a","b"] as it came; a repeat allows
// nothing more, so it is minted once, in the order given, as the OAuth
// client registration stores it.
func TestAdminClientRepeatedPatternsMintedOnce(t *testing.T) {
	e := newEnv(t, map[string]int32{"demo": 1})
	h := e.start(t)
	var out struct {
		Credential string `json:"client_credential"`
	}
	h.call(t, "POST", "/v1/admin/clients", e.adminToken,
		map[string]any{"name": "svc", "groups": []string{"b", "a", "b", "a"}, "topics": []string{"demo", "demo"}}, 200, &out)
	e.remember(out.Credential)
	c := claimsOf(t, out.Credential)
	list := func(v any) []string {
		var s []string
		for _, e := range v.([]any) {
			s = append(s, e.(string))
		}
		return s
	}
	if g, tp := list(c["grps"]), list(c["tps"]); !slices.Equal(g, []string{"b", "a"}) || !slices.Equal(tp, []string{"demo"}) {
		t.Fatalf("minted groups %v, topics %v; want [b a] and [demo]", g, tp)
	}
}

// TestRefusalsNameTheFieldValueAndRange (redteam4 #9): refusals that put
// every condition in one message ("holder (…) and ttl_ms >= 1000
// required", "a valid topic and partition >= 0 required", "member_id,
// instance_id and client_id must be …", a QoS body without a selector
// answered "qos: id and a selector required" though the id is derived) or
// named no value and no range ("wait_ms must be >= 0",
// "session_timeout_ms must be >= 0", a group config in durations of
// fields the request does not have). Each now names the one field at
// fault, the value given and what is allowed, with details field (and
// min, max in ms where a range applies).
func TestRefusalsNameTheFieldValueAndRange(t *testing.T) {
	e := newEnv(t, map[string]int32{"demo": 1})
	h := e.start(t)
	admin := e.adminToken
	bad := func(method, path, token string, body any, message string, details map[string]any) {
		t.Helper()
		got := h.refusal(t, method, path, token, body, 400, api.CodeBadRequest, message)
		for k, v := range details {
			if got[k] != v {
				t.Errorf("%s %s %v: details %s = %v, want %v", method, path, body, k, got[k], v)
			}
		}
	}
	nameRule := `1 to 255 printable ASCII characters from '!' to '~' (no space, no '/', nothing outside ASCII), and not "." or ".."`

	bad("PUT", "/v1/admin/qos", admin, map[string]any{},
		"selector: name at least one of group, topic, partition, holder, jti (the override applies to what matches them all)", map[string]any{"field": "selector"})
	bad("PUT", "/v1/admin/qos", admin, map[string]any{"selector": map[string]any{"group": "g"}, "log_level": "loud", "ttl_ms": 1000},
		`log_level must be debug, info, warn or error, got "loud"`, nil)
	bad("POST", "/v1/admin/groups/g/partitions/demo/0/lease", admin, map[string]any{"holder": "a b", "ttl_ms": 60_000},
		`holder "a b": a holder is `+nameRule, map[string]any{"field": "holder"})
	bad("POST", "/v1/admin/groups/g/partitions/demo/0/lease", admin, map[string]any{"holder": "h", "ttl_ms": 10},
		"ttl_ms 10 (10ms) is below 1000 (1s): a lease's capability lasts at least 1s", map[string]any{"field": "ttl_ms", "min": float64(1000)})
	grant := map[string]any{"topic": "demo", "partition": 0, "holder": "auditor", "ops": []string{"fetch"}, "ttl_ms": 60_000}
	with := func(k string, v any) map[string]any {
		out := map[string]any{}
		for key, val := range grant {
			out[key] = val
		}
		out[k] = v
		return out
	}
	bad("POST", "/v1/admin/capabilities", admin, with("topic", "de mo"),
		`topic "de mo": a topic is 1 to 249 characters from a-z, A-Z, 0-9, '.', '_' and '-' (Kafka's rule), and not "." or ".."`, map[string]any{"field": "topic"})
	bad("POST", "/v1/admin/capabilities", admin, with("partition", -1), "partition must be >= 0, got -1", map[string]any{"field": "partition"})
	bad("POST", "/v1/admin/capabilities", admin, with("holder", "a/b"), `holder "a/b": a holder is `+nameRule, map[string]any{"field": "holder"})

	cred := h.clientCredential(t, []string{"g"}, []string{"demo"})
	bad("POST", "/v1/groups/g/join", cred, map[string]any{"topics": []string{"demo"}, "instance_id": "a b"},
		`instance_id "a b": must be `+nameRule, map[string]any{"field": "instance_id"})
	for _, ms := range []int64{-5, 1, 300_001} {
		text := map[int64]string{-5: "-5 (-5ms)", 1: "1 (1ms)", 300_001: "300001 (5m0.001s)"}[ms]
		bad("POST", "/v1/groups/g/join", cred, map[string]any{"topics": []string{"demo"}, "session_timeout_ms": ms},
			"session_timeout_ms "+text+" is outside [1000, 300000] (1s to 5m0s: coordinator.groups.session_timeout_min, coordinator.groups.session_timeout_max); 0 or absent: the group's",
			map[string]any{"field": "session_timeout_ms", "min": float64(1000), "max": float64(300_000)})
	}
	m := h.join(t, "g", cred, api.JoinRequest{Topics: []string{"demo"}})
	bad("POST", "/v1/groups/g/heartbeat", m.token, map[string]any{"wait_ms": -5},
		"wait_ms -5 is outside [0, 2000] (0s to 2s: coordinator.groups.heartbeat_wait; 0 answers at once, more is held 2s)",
		map[string]any{"field": "wait_ms", "min": float64(0), "max": float64(2000)})

	bad("PUT", "/v1/admin/groups/g/config", admin, map[string]any{"handoff_timeout_ms": -1},
		"group config: handoff_timeout_ms -1 (-1ms) is outside [1, 300000] (1ms to 5m0s: coordinator.groups.handoff_timeout_max)",
		map[string]any{"field": "handoff_timeout_ms", "min": float64(1), "max": float64(300_000)})
	bad("PUT", "/v1/admin/groups/g/config", admin, map[string]any{"session_timeout_ms": 999},
		"group config: session_timeout_ms 999 (999ms) is outside [1000, 300000] (1s to 5m0s: coordinator.groups.session_timeout_min, coordinator.groups.session_timeout_max)",
		map[string]any{"field": "session_timeout_ms"})
	bad("PUT", "/v1/admin/groups/g/config", admin, map[string]any{"max_moves_per_second": -1},
		"group config: max_moves_per_second: must be within [0, 1000000] (0: unlimited), got -1", nil)
}
