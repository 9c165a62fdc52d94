package coordinator_test

import (
	"testing"

	"github.com/capgate/capgate/api"
)

// TestQueryNumbersHaveOneSpelling: a number in a coordinator query has the
// spelling every number of the API has (api.ParseDecimal) — no sign, no
// leading zero, within its range — as the gateway's fetch query and both
// servers' partition paths. `limit=05`, `limit=+5`, `after=01` were read
// as 5 and 1 (strconv), so two spellings named one page or seq.
func TestQueryNumbersHaveOneSpelling(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	for _, path := range []string{
		"/v1/admin/groups?limit=05", "/v1/admin/groups?limit=+5", "/v1/admin/groups?limit=0",
		"/v1/admin/audit?before=007", "/v1/admin/audit?before=-1",
	} {
		h.expectError(t, "GET", path, e.adminToken, nil, 400, api.CodeBadRequest)
	}
	for _, path := range []string{"/v1/sync?gateway=gw&after=01", "/v1/sync?gateway=gw&wait_ms=+0", "/v1/sync?gateway=gw&after=18446744073709551615"} {
		h.expectError(t, "GET", path, e.syncToken, nil, 400, api.CodeBadRequest)
	}
	for _, path := range []string{"/v1/admin/groups?limit=5", "/v1/admin/audit?before=7"} {
		if status, body, _ := h.do(t, "GET", path, e.adminToken, nil); status != 200 {
			t.Fatalf("%s: %d %s", path, status, body)
		}
	}
	if status, body, _ := h.do(t, "GET", "/v1/sync?gateway=gw&after=0&wait_ms=0", e.syncToken, nil); status != 200 {
		t.Fatalf("a sync poll spelled canonically: %d %s", status, body)
	}
}
