package coordinator_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
)

// TestGroupConfigPastItsBoundsRefused: PUT …/groups/g/config with a
// handoff_timeout_ms of 1e15 answered 200 and kept 9223372036854 ms, so
// a holder that stays alive and never releases held a handoff up for
// ever. Now each field has an upper bound and the 400 names it; a value
// too large for a duration says "too large" with the max, never
// 2562047h47m16.854775807s (a lease's ttl likewise).
func TestGroupConfigPastItsBoundsRefused(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	h := e.start(t)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	for _, tc := range []struct {
		path string
		body map[string]any
		want string
	}{
		{"/config", map[string]any{"handoff_timeout_ms": int64(1_000_000_000_000_000)}, "handoff_timeout_ms 1000000000000000 is outside [1, 300000] (1ms to 5m0s: coordinator.groups.handoff_timeout_max)"},
		{"/config", map[string]any{"handoff_timeout_ms": 300_001}, "handoff_timeout_ms 300001 (5m0.001s) is outside [1, 300000] (1ms to 5m0s: coordinator.groups.handoff_timeout_max)"},
		{"/config", map[string]any{"handoff_timeout_ms": 0}, "handoff_timeout_ms 0 (0s) is outside [1, 300000]"},
		{"/config", map[string]any{"session_timeout_ms": int64(1 << 62)}, "session_timeout_ms 4611686018427387904 is outside [1000, 300000] (1s to 5m0s: coordinator.groups.session_timeout_min, coordinator.groups.session_timeout_max)"},
		{"/config", map[string]any{"session_timeout_ms": 0}, "session_timeout_ms 0 (0s) is outside [1000, 300000]"},
		{"/config", map[string]any{"max_moves_per_second": 1_000_001}, "max_moves_per_second: must be within [0, 1000000] (0: unlimited), got 1000001"},
		{"/config", map[string]any{"max_moves_per_second": -1}, "max_moves_per_second: must be within [0, 1000000] (0: unlimited), got -1"},
		{"/partitions/orders/1/lease", map[string]any{"holder": "partner", "ttl_ms": int64(1 << 62)}, "ttl_ms 4611686018427387904 is above coordinator.groups.limits.lease_ttl_max (24h0m0s)"},
	} {
		method := "PUT"
		if strings.HasSuffix(tc.path, "/lease") {
			method = "POST"
		}
		status, b, _ := h.do(t, method, "/v1/admin/groups/g"+tc.path, e.adminToken, tc.body)
		var body api.ErrorBody
		if status != 400 || json.Unmarshal(b, &body) != nil || body.Error.Code != api.CodeBadRequest || !strings.Contains(body.Error.Message, tc.want) {
			t.Errorf("%s %v: %d %s, want 400 saying %q", tc.path, tc.body, status, b, tc.want)
		}
		if strings.Contains(string(b), "2562047h") {
			t.Errorf("%s %v: prints the saturated duration: %s", tc.path, tc.body, b)
		}
	}
	if c := h.describe(t, "g").Config; c.HandoffTimeoutMs != 10_000 || c.MaxMovesPerSecond != 0 {
		t.Fatalf("a refused config was kept: %+v", c)
	}
	h.call(t, "PUT", "/v1/admin/groups/g/config", e.adminToken, map[string]any{"handoff_timeout_ms": 300_000}, 200, nil)
}
