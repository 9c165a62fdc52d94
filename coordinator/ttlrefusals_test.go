package coordinator_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// refusedWith sends body and requires 400 bad_request with exactly
// message and, when details is not nil, those details (numbers as JSON
// decodes them); the test goes on, so one run lists every refusal.
func (h *harness) refusedWith(t *testing.T, method, path, token string, body any, message string, details map[string]any) {
	t.Helper()
	status, b, _ := h.do(t, method, path, token, body)
	var out api.ErrorBody
	if err := json.Unmarshal(b, &out); err != nil || status != 400 || out.Error.Code != api.CodeBadRequest || out.Error.Message != message {
		t.Errorf("%s %s %v: got %d %.400s, want 400 bad_request %q", method, path, body, status, b, message)
		return
	}
	for k, v := range details {
		if got := out.Error.Details[k]; got != v {
			t.Errorf("%s %s %v: details %s = %v, want %v (%s)", method, path, body, k, got, v, b)
		}
	}
}

// TestTTLRefusalsNameTheBound is the red team's first-day user: `capgate
// admin grant … --ttl 1h` was answered "ttl_ms must be within [1000,
// max_lease]" — neither the ttl asked nor max_lease's value (10m) nor
// where to change it. Every admin ttl out of range (a shared grant, a
// client credential, a lease, a QoS override) now names the ttl asked in
// ms and human units, the bound's value both ways and its setting, with
// details limit and max (ms); below the floor, what lasts at least a
// second. The other range refusals of the admin API name the value
// given. Codes unchanged: 400 bad_request; at the bound a request passes.
func TestTTLRefusalsNameTheBound(t *testing.T) {
	e := newEnv(t, map[string]int32{"demo": 1})
	e.cfg.Groups.Limits.LeaseTTLMax = 2 * time.Hour
	h := e.start(t)
	admin := e.adminToken
	grant := func(ttlMs int64) map[string]any {
		return map[string]any{"topic": "demo", "partition": 0, "holder": "auditor", "ops": []string{"fetch"}, "ttl_ms": ttlMs}
	}

	t.Run("shared grant", func(t *testing.T) {
		h.refusedWith(t, "POST", "/v1/admin/capabilities", admin, grant(3600_000),
			"ttl_ms 3600000 (1h0m0s) is above coordinator.max_lease (10m0s): ask for at most 600000 (10m0s), or raise coordinator.max_lease",
			map[string]any{"limit": "coordinator.max_lease", "max": float64(600_000)})
		h.refusedWith(t, "POST", "/v1/admin/capabilities", admin, grant(1<<63-1),
			"ttl_ms 9223372036854775807 is above coordinator.max_lease (10m0s): ask for at most 600000 (10m0s), or raise coordinator.max_lease",
			map[string]any{"limit": "coordinator.max_lease", "max": float64(600_000)})
		h.refusedWith(t, "POST", "/v1/admin/capabilities", admin, grant(500),
			"ttl_ms 500 (500ms) is below 1000 (1s): a capability lasts at least 1s", nil)
		h.call(t, "POST", "/v1/admin/capabilities", admin, grant(600_000), 200, nil)
	})

	t.Run("client credential", func(t *testing.T) {
		client := func(ttlMs int64) map[string]any {
			return map[string]any{"name": "svc", "groups": []string{"*"}, "topics": []string{"demo"}, "ttl_ms": ttlMs}
		}
		h.refusedWith(t, "POST", "/v1/admin/clients", admin, client(31*24*3600_000),
			"ttl_ms 2678400000 (744h0m0s) is above coordinator.client_credential_ttl_max (720h0m0s): ask for at most 2592000000 (720h0m0s), or raise coordinator.client_credential_ttl_max",
			map[string]any{"field": "ttl_ms", "limit": "coordinator.client_credential_ttl_max", "max": float64(2_592_000_000)})
		h.refusedWith(t, "POST", "/v1/admin/clients", admin, client(999),
			"ttl_ms 999 (999ms) is below 1000 (1s): a credential lasts at least 1s", map[string]any{"field": "ttl_ms", "min": float64(1000)})
		h.refusedWith(t, "POST", "/v1/admin/clients", admin, client(-1), "ttl_ms must be >= 0 (0: coordinator.member_token_ttl, 24h0m0s), got -1",
			map[string]any{"field": "ttl_ms", "min": float64(0)})
		h.call(t, "POST", "/v1/admin/clients", admin, client(30*24*3600_000), 200, nil)
	})

	t.Run("lease", func(t *testing.T) {
		lease := "/v1/admin/groups/g/partitions/demo/0/lease"
		h.refusedWith(t, "POST", lease, admin, map[string]any{"holder": "h", "ttl_ms": 3 * 3600_000},
			"ttl_ms 10800000 (3h0m0s) is above coordinator.groups.limits.lease_ttl_max (2h0m0s): ask for at most 7200000 (2h0m0s), or raise coordinator.groups.limits.lease_ttl_max",
			map[string]any{"limit": "coordinator.groups.limits.lease_ttl_max", "max": float64(7_200_000)})
		h.refusedWith(t, "POST", lease, admin, map[string]any{"holder": "h", "ttl_ms": 10},
			"ttl_ms 10 (10ms) is below 1000 (1s): a lease's capability lasts at least 1s", nil)
		h.refusedWith(t, "POST", lease, admin, map[string]any{"holder": "a/b", "ttl_ms": 60_000},
			`holder "a/b": a holder is `+ocap.NameRule, nil)
		// At the bound the ttl passes: the group is what is missing.
		h.expectError(t, "POST", lease, admin, map[string]any{"holder": "h", "ttl_ms": 7_200_000}, 404, api.CodeNotFound)
	})

	t.Run("qos", func(t *testing.T) {
		qos := func(extra map[string]any) map[string]any {
			body := map[string]any{"selector": map[string]string{"group": "g"}, "log_level": "debug", "ttl_ms": 60_000}
			for k, v := range extra {
				body[k] = v
			}
			return body
		}
		h.refusedWith(t, "PUT", "/v1/admin/qos", admin, qos(map[string]any{"ttl_ms": 25 * 3600_000}),
			"ttl_ms 90000000 (25h0m0s) is above coordinator.groups.limits.qos_ttl_max (24h0m0s): ask for at most 86400000 (24h0m0s), or raise coordinator.groups.limits.qos_ttl_max",
			map[string]any{"limit": "coordinator.groups.limits.qos_ttl_max", "max": float64(86_400_000)})
		h.refusedWith(t, "PUT", "/v1/admin/qos", admin, qos(map[string]any{"ttl_ms": 0}), "ttl_ms must be > 0 (how long the override lasts, at most 86400000: coordinator.groups.limits.qos_ttl_max, 24h0m0s), got 0", nil)
		h.refusedWith(t, "PUT", "/v1/admin/qos", admin, qos(map[string]any{"max_bytes_per_sec": -1}),
			"max_bytes_per_sec must be >= 0 (0 removes a rate), got -1", nil)
		h.refusedWith(t, "PUT", "/v1/admin/qos", admin, qos(map[string]any{"monitor": fmt.Sprintf("%065d", 0)}),
			"monitor: at most 64 bytes, got 65", nil)
	})

	t.Run("page limit and offset", func(t *testing.T) {
		h.refusedWith(t, "GET", "/v1/admin/groups?limit=0", admin, nil,
			`limit must be a decimal integer from 1 to 10000 (coordinator.describe_page_max) without sign or leading zeros, got "0"`, nil)
		h.refusedWith(t, "GET", "/v1/admin/groups?limit=10001", admin, nil,
			`limit must be a decimal integer from 1 to 10000 (coordinator.describe_page_max) without sign or leading zeros, got "10001"`, nil)
		h.refusedWith(t, "PUT", "/v1/admin/groups/g/partitions/demo/0/offset", admin, map[string]any{"offset": -5},
			"offset must be >= 0, got -5", nil)
	})
}
