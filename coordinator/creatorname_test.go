package coordinator_test

import (
	"testing"

	"github.com/capgate/capgate/api"
)

// TestDescribeNamesTheCreatorOfAnEmptyGroup (newuser3 #11): GET
// /v1/admin/groups/{g} names the creating credential (creator_name: the
// client credential's name) beside its id also once no member is live;
// before, the name could only be read off a live member's credential.
func TestDescribeNamesTheCreatorOfAnEmptyGroup(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	jti, _ := claimsOf(t, creds)["jti"].(string)
	m := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	h.call(t, "POST", "/v1/groups/g/leave", m.token, map[string]any{}, 200, nil)
	d := h.describe(t, "g")
	if len(d.Members) != 0 || d.Creator != jti || d.CreatorName != "svc" {
		t.Fatalf("empty group: creator %q creator_name %q, %d members", d.Creator, d.CreatorName, len(d.Members))
	}
}
