package coordinator_test

import (
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
)

// TestUnknownRouteSaysWhatIsServed: a 404 names the path asked for and
// what the coordinator serves — it said only "no such route" to a new
// user whose base URL carried a path (/api) or who sent a fetch to the
// coordinator instead of a gateway.
func TestUnknownRouteSaysWhatIsServed(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	for _, tc := range []struct{ path, says string }{
		{"/api/v1/groups/g/join", "coordinator's base URL"},
		{"/v1/topics/orders/partitions/0/records?offset=0", "at a gateway"},
	} {
		status, body, _ := h.do(t, "POST", tc.path, "", nil)
		if status != 404 || errorCode(t, body) != api.CodeNotFound || !strings.Contains(string(body), tc.says) ||
			!strings.Contains(string(body), strings.Split(tc.path, "?")[0]) || strings.Contains(string(body), "offset=0") {
			t.Fatalf("POST %s: %d %s, want 404 not_found naming the path (without its query) and saying %q", tc.path, status, body, tc.says)
		}
	}
}
