package coordinator_test

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// snapshotOf is what a gateway joining now is sent: a reset snapshot.
func snapshotOf(t testing.TB, h *harness) api.SyncResponse {
	t.Helper()
	return newGateway(h, "fresh").poll(t, 0, 0)
}

// TestDenyPastEveryTokenLifetimeRefused: the attack is an admin deny
// with exp a century away. No token it can match lives past now + the
// longest token lifetime (max_lease, member_token_ttl,
// client_credential_ttl_max: 720h by default), yet the entry was held
// until exp — by the coordinator, its store, the sync log and every
// gateway (200, exp echoed). It is 400 naming the bound now, and nothing
// is denied or sent; an exp within the bound, or none (the bound
// itself), is taken as before.
func TestDenyPastEveryTokenLifetimeRefused(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	before := snapshotOf(t, h)
	jti := randomJTI(t)
	path := "/v1/admin/capabilities/" + jti + "/revoke"
	longest := e.cfg.ClientCredentialTTLMax
	for _, exp := range []int64{time.Now().Add(100 * 365 * 24 * time.Hour).Unix(), time.Now().Add(longest + time.Hour).Unix(), -1} {
		status, b, _ := h.do(t, "POST", path, e.adminToken, map[string]any{"exp": exp})
		if status != 400 || errorCode(t, b) != api.CodeBadRequest {
			t.Fatalf("deny with exp %d: %d %s, want 400 bad_request", exp, status, b)
		}
		if d := errorDetails(t, b); exp > 0 && (d["limit"] != "coordinator.client_credential_ttl_max" || d["max"] == nil) {
			t.Fatalf("deny with exp %d: details %v, want limit and max", exp, d)
		}
	}
	if after := snapshotOf(t, h); after.Seq != before.Seq || len(after.Denied) != 0 {
		t.Fatalf("refused denies changed the sync state: seq %d → %d, denied %+v", before.Seq, after.Seq, after.Denied)
	}

	within := time.Now().Add(time.Hour).Unix()
	var out struct {
		JTI string `json:"jti"`
		Exp int64  `json:"exp"`
	}
	h.call(t, "POST", path, e.adminToken, map[string]any{"exp": within}, 200, &out)
	if out.Exp != within {
		t.Fatalf("a deny within the bound answered exp %d, want %d", out.Exp, within)
	}
	other := randomJTI(t)
	h.call(t, "POST", "/v1/admin/capabilities/"+other+"/revoke", e.adminToken, map[string]any{}, 200, &out)
	if latest := time.Now().Add(longest).Unix() + 1; out.Exp > latest || out.Exp < latest-60 {
		t.Fatalf("a deny without exp holds until %d, want now + %s (%d)", out.Exp, longest, latest)
	}
	if got := snapshotOf(t, h).Denied; len(got) != 2 {
		t.Fatalf("denied after two good denies: %+v", got)
	}
}

// TestQoSTTLPastTheLimitRefused: the attack is a QoS override for ever
// (ttl_ms of a century; MaxInt64 was answered 200 and held by every
// gateway for 292 years). Past groups.limits.qos_ttl_max it is 400
// naming the limit with details limit and max, and nothing is kept or
// sent to the gateways; at the limit it passes.
func TestQoSTTLPastTheLimitRefused(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.Groups.Limits.QoSTTLMax = time.Hour
	h := e.start(t)
	before := snapshotOf(t, h)
	for _, ms := range []int64{3600_001, 100 * 365 * 24 * 3600_000, 1<<63 - 1} {
		status, b, _ := h.do(t, "PUT", "/v1/admin/qos", e.adminToken, map[string]any{"selector": map[string]string{"group": "g"}, "log_level": "debug", "ttl_ms": ms})
		if status != 400 || errorCode(t, b) != api.CodeBadRequest {
			t.Fatalf("qos ttl_ms %d: %d %s, want 400 bad_request", ms, status, b)
		}
		if d := errorDetails(t, b); d["limit"] != "coordinator.groups.limits.qos_ttl_max" || d["max"] != float64(3600_000) {
			t.Fatalf("qos ttl_ms %d: details %v", ms, d)
		}
	}
	var list struct {
		Overrides []api.QoSOverride `json:"overrides"`
	}
	h.call(t, "GET", "/v1/admin/qos", e.adminToken, nil, 200, &list)
	if after := snapshotOf(t, h); len(list.Overrides) != 0 || after.Seq != before.Seq || len(after.QoS) != 0 {
		t.Fatalf("refused overrides changed state: %+v, seq %d → %d, sent %+v", list.Overrides, before.Seq, after.Seq, after.QoS)
	}
	h.call(t, "PUT", "/v1/admin/qos", e.adminToken, map[string]any{"selector": map[string]string{"group": "g"}, "ttl_ms": 3600_000}, 200, nil)
}
