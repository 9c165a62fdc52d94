package coordinator_test

import (
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
)

// TestSyncInstanceValidated: the instance argument of the sync channel
// is 1-64 characters [A-Za-z0-9_-] when present; anything else is 400
// bad_request and registers nothing.
func TestSyncInstanceValidated(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	for _, bad := range []string{"", "a%20b", "a.b", strings.Repeat("x", 65)} {
		h.expectError(t, "GET", "/v1/sync?gateway=gw&wait_ms=0&instance="+bad, e.syncToken, nil, 400, api.CodeBadRequest)
		h.expectError(t, "POST", "/v1/sync/leave?gateway=gw&instance="+bad, e.syncToken, nil, 400, api.CodeBadRequest)
	}
	if gws := gateways(t, h); len(gws) != 0 {
		t.Fatalf("gateways after refused polls: %+v", gws)
	}
	h.call(t, "GET", "/v1/sync?gateway=gw&wait_ms=0&instance="+strings.Repeat("x", 64), e.syncToken, nil, 200, nil)
}
