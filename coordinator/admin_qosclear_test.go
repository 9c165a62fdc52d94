package coordinator_test

import (
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestQoSClearAndAuditDetails: a log level or a monitor tag set on an
// override could not be taken off it — an empty one keeps the earlier
// value, and the console's dialog had nothing else to send (console5 #7):
// clear empties them, the byte rate kept. A field both set and cleared,
// or a clear of anything else, is 400 and changes nothing. And the audit
// entry of a QoS action said only qos:<id>, nothing of what it throttles
// (console5 #8): its details name the selector and what was set, cleared
// or ended.
func TestQoSClearAndAuditDetails(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 4})
	h := e.start(t)
	p := int32(3)
	sel := api.QoSSelector{Topic: "orders", Partition: &p}
	rate := int64(1000)
	var o api.QoSOverride
	h.call(t, "PUT", "/v1/admin/qos", e.adminToken, coordinator.QoSRequest{Selector: sel, LogLevel: "debug", Monitor: "incident-7",
		MaxBytesPerSec: &rate, TTLMs: 600000}, 200, &o)
	for _, body := range []map[string]any{
		{"selector": sel, "ttl_ms": 600000, "clear": []string{"max_bytes_per_sec"}},
		{"selector": sel, "ttl_ms": 600000, "clear": []string{"log_level"}, "log_level": "info"},
		{"selector": sel, "ttl_ms": 600000, "clear": []string{"monitor", "log_level", "monitor"}},
	} {
		h.expectError(t, "PUT", "/v1/admin/qos", e.adminToken, body, 400, api.CodeBadRequest)
	}
	var cleared api.QoSOverride // a fresh one: the answer omits empty fields
	h.call(t, "PUT", "/v1/admin/qos", e.adminToken, coordinator.QoSRequest{Selector: sel, Clear: []string{"log_level", "monitor"}, TTLMs: 600000}, 200, &cleared)
	if cleared.LogLevel != "" || cleared.Monitor != "" || cleared.MaxBytesPerSec != 1000 {
		t.Fatalf("after clear log_level, monitor: %+v, want both empty and the rate kept", cleared)
	}
	var list coordinator.QoSListResponse
	h.call(t, "GET", "/v1/admin/qos", e.adminToken, nil, 200, &list)
	if len(list.Overrides) != 1 || list.Overrides[0].LogLevel != "" || list.Overrides[0].Monitor != "" || list.Overrides[0].MaxBytesPerSec != 1000 {
		t.Fatalf("listed after the clear: %+v", list.Overrides)
	}
	h.call(t, "PUT", "/v1/admin/qos", e.adminToken, map[string]any{"id": o.ID, "selector": sel, "ttl_ms": 1}, 200, nil)

	var page coordinator.AuditResponse
	h.call(t, "GET", "/v1/admin/audit?target=qos:", e.adminToken, nil, 200, &page)
	want := []string{ // newest first
		"topic=orders partition=3: ended",
		"topic=orders partition=3: log_level cleared, monitor cleared for 10m0s",
		"topic=orders partition=3: log_level=debug, monitor=incident-7, max_bytes_per_sec=1000 for 10m0s",
	}
	if len(page.Entries) != len(want) {
		t.Fatalf("QoS audit entries %+v, want %d", page.Entries, len(want))
	}
	for i, w := range want {
		if got := page.Entries[i]; got.Details != w || got.Target != "qos:"+o.ID {
			t.Errorf("entry %d: target %q details %q, want qos:%s %q", i, got.Target, got.Details, o.ID, w)
		}
	}
}
