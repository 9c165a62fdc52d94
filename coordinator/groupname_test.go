package coordinator_test

import (
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// A group name the routes refuse is answered with the rule (redteam4 #8:
// a bare "invalid group name" left a first-day user guessing which
// character was wrong), naming the name asked.
func TestInvalidGroupNameStatesTheRule(t *testing.T) {
	h := newEnv(t, map[string]int32{"orders": 1}).start(t)
	cred := h.clientCredential(t, []string{"*"}, []string{"*"})
	req := api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 30_000}
	for _, path := range []string{"/v1/groups/a%20b/join", "/v1/groups/caf%C3%A9/join"} {
		status, body, _ := h.do(t, "POST", path, cred, req)
		if status != 400 || errorCode(t, body) != api.CodeBadRequest || !strings.Contains(string(body), "invalid group name") ||
			!strings.Contains(string(body), "no space, no '/'") {
			t.Fatalf("%s: %d %s; want 400 bad_request stating the rule (%s)", path, status, body, ocap.NameRule)
		}
	}
}
