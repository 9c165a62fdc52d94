package coordinator_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// startWithMember starts a coordinator for topic orders (2 partitions)
// with a gateway that acks every poll (halted when t ends) and one member
// of group g holding both partitions.
func startWithMember(t *testing.T) (*env, *harness, *member) {
	t.Helper()
	e := newEnv(t, map[string]int32{"orders": 2})
	h := e.start(t)
	gw := newGateway(h, "gw1")
	gw.run(500)
	t.Cleanup(gw.halt)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	return e, h, h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
}

// TestAdminFreeTextRefusesControlCharacters: the attack is free text an
// admin API keeps and lists again carrying terminal escapes — a QoS
// monitor tag "ok\x1b[2J\x00…" was 200, kept, sent to every gateway (a
// label of their /metrics) and printed raw by `capgate admin qos list`;
// a revoke's reason reached `capgate admin audit` the same way, clearing
// or retitling the terminal of the next admin to list it. A control
// character (C0, DEL, C1) in a monitor tag, an override's id or
// selector, any action's reason (partition revoke, member revoke, deny)
// or an offset reset's metadata is 400 bad_request naming the field
// (details field), and nothing changes; the audit log records the
// refused requests. Printable text in any script is taken as before.
func TestAdminFreeTextRefusesControlCharacters(t *testing.T) {
	e, h, a := startWithMember(t)
	var before coordinator.GroupDescription
	h.call(t, "GET", "/v1/admin/groups/g", e.adminToken, nil, 200, &before)
	jti := randomJTI(t)

	refused := func(method, path string, body map[string]any, field string) {
		t.Helper()
		status, b, _ := h.do(t, method, path, e.adminToken, body)
		var eb api.ErrorBody
		_ = json.Unmarshal(b, &eb)
		if status != 400 || eb.Error.Code != api.CodeBadRequest || eb.Error.Details["field"] != field ||
			!strings.HasPrefix(eb.Error.Message, field+": control character") {
			t.Errorf("%s %s with a control character in %s: %d %s, want 400 bad_request naming %s", method, path, field, status, b, field)
		}
	}
	for _, control := range []string{"\x1b[2J", "\x00", "\a", "\x7f", "\u009b31m", "\u0085", "\n", "\r", "\t"} {
		text := "ok" + control + "FAKE"
		refused("PUT", "/v1/admin/qos", map[string]any{"selector": map[string]any{"group": "g"}, "monitor": text, "ttl_ms": 60_000}, "monitor")
		refused("PUT", "/v1/admin/qos", map[string]any{"id": text, "selector": map[string]any{"group": "g"}, "ttl_ms": 60_000}, "id")
		refused("PUT", "/v1/admin/qos", map[string]any{"selector": map[string]any{"holder": text}, "log_level": "debug", "ttl_ms": 60_000}, "selector.holder")
		refused("POST", "/v1/admin/groups/g/partitions/orders/0/revoke", map[string]any{"reason": text}, "reason")
		refused("POST", "/v1/admin/groups/g/members/"+a.id+"/revoke", map[string]any{"reason": text}, "reason")
		refused("POST", "/v1/admin/capabilities/"+jti+"/revoke", map[string]any{"reason": text}, "reason")
		refused("PUT", "/v1/admin/groups/g/partitions/orders/1/offset", map[string]any{"offset": 0, "metadata": text}, "metadata")
	}

	// Nothing changed: nothing denied, no override, the member and every
	// epoch as they were, nothing committed.
	var after coordinator.GroupDescription
	h.call(t, "GET", "/v1/admin/groups/g", e.adminToken, nil, 200, &after)
	if got := snapshotOf(t, h); len(got.Denied) != 0 || len(got.QoS) != 0 {
		t.Fatalf("refused requests reached the gateways: denied %+v, overrides %+v", got.Denied, got.QoS)
	}
	if len(after.Members) != 1 || after.Members[0].ID != a.id || len(after.Partitions) != len(before.Partitions) {
		t.Fatalf("group after refused requests: %+v, want %+v", after, before)
	}
	for i, p := range after.Partitions {
		if p.Epoch != before.Partitions[i].Epoch || p.Committed != nil {
			t.Fatalf("partition %s/%d after refused requests: epoch %d committed %v, want epoch %d, nothing committed",
				p.Topic, p.Partition, p.Epoch, p.Committed, before.Partitions[i].Epoch)
		}
	}

	// Printable text, in any script, is free text as before.
	monitor := "équipe-α ✓ (eu) — 日本"
	var override api.QoSOverride
	h.call(t, "PUT", "/v1/admin/qos", e.adminToken, map[string]any{"selector": map[string]any{"group": "g"}, "monitor": monitor, "ttl_ms": 60_000}, 200, &override)
	if override.Monitor != monitor {
		t.Fatalf("monitor %q kept as %q", monitor, override.Monitor)
	}
	h.call(t, "POST", "/v1/admin/capabilities/"+jti+"/revoke", e.adminToken, map[string]any{"reason": "leaked — «ключ» rotated"}, 200, nil)

	// The audit log lists the refused requests with the reason as sent
	// (a record; the clients escape what they print).
	var page coordinator.AuditResponse
	h.call(t, "GET", "/v1/admin/audit?limit=1000", e.adminToken, nil, 200, &page)
	refusedReasons := map[string]bool{}
	for _, entry := range page.Entries {
		if entry.Status == 400 && entry.Result == string(api.CodeBadRequest) {
			refusedReasons[entry.Reason] = true
		}
	}
	for _, want := range []string{"ok\x1b[2JFAKE", "ok\x00FAKE", "ok\u009b31mFAKE"} {
		if !refusedReasons[want] {
			t.Errorf("no refused entry with reason %q in the audit log", want)
		}
	}
}
