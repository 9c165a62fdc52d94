package coordinator_test

import (
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/ocap"
)

// TestLongClientIDJoinLeavesNoGhost is the red team's attack: a join
// whose client_id had 239-255 characters answered 500 (the member id,
// client_id + "-" + 16 hex digits, was too long for a member token's
// sub) but left a member of a 256-272-character id holding every
// partition, which the admin route refused to name (400 invalid member
// id) and which kept every other member waiting for its session
// timeout. Now the member id cuts the client_id so it is always a name:
// the join answers its member, its token works, and an admin revokes
// the longest id there is (255 characters). A client_id past 255
// characters is still 400 and makes no member.
func TestLongClientIDJoinLeavesNoGhost(t *testing.T) {
	e := newEnv(t, map[string]int32{"demo": 12})
	h := e.start(t)
	cred := h.clientCredential(t, []string{"ghost"}, []string{"demo"})
	join := func(clientID string) api.JoinRequest {
		return api.JoinRequest{Topics: []string{"demo"}, SessionTimeoutMs: 300_000, ClientID: clientID}
	}
	for _, n := range []int{238, 239, 255} {
		clientID := strings.Repeat("c", n)
		m := h.join(t, "ghost", cred, join(clientID))
		if len(m.id) > group.MemberIDMax || !ocap.ValidName(m.id) || !strings.HasPrefix(m.id, clientID[:238]+"-") {
			t.Fatalf("client_id of %d: member id of %d characters: %q", n, len(m.id), m.id)
		}
		if sub := claimsOf(t, m.token)["sub"]; sub != m.id {
			t.Fatalf("client_id of %d: member token sub %v, member id %s", n, sub, m.id)
		}
		m.heartbeat(t, 0)
		d := h.describe(t, "ghost")
		if len(d.Members) != 1 || d.Members[0].ID != m.id || d.Members[0].ClientID != clientID {
			t.Fatalf("client_id of %d: members %+v, want only %s", n, d.Members, m.id)
		}
		if len(m.id) != group.MemberIDMax && n >= 238 {
			t.Fatalf("client_id of %d: member id of %d characters, want the longest (%d)", n, len(m.id), group.MemberIDMax)
		}
		var out coordinator.MemberRevokeResponse
		h.call(t, "POST", "/v1/admin/groups/ghost/members/"+m.id+"/revoke", e.adminToken, coordinator.RevokeRequest{Reason: "test"}, http.StatusOK, &out)
		if out.MemberID != m.id {
			t.Fatalf("revoked %q, want %q", out.MemberID, m.id)
		}
		if d := h.describe(t, "ghost"); len(d.Members) != 0 {
			t.Fatalf("client_id of %d: members left after the revoke: %+v", n, d.Members)
		}
	}

	h.expectError(t, "POST", "/v1/groups/ghost/join", cred, join(strings.Repeat("c", 256)), http.StatusBadRequest, api.CodeBadRequest)
	if d := h.describe(t, "ghost"); len(d.Members) != 0 {
		t.Fatalf("a refused join made a member: %+v", d.Members)
	}
}

// TestAdminNamesEveryMemberID: the admin revoke route takes every id a
// member can have — the 255 characters of today's longest, and the up to
// 272 a coordinator made before member ids were cut (a store may still
// hold such a member): an id of no member is 409 unknown_member, not 400.
// Longer, or not a name, is 400.
func TestAdminNamesEveryMemberID(t *testing.T) {
	e := newEnv(t, map[string]int32{"demo": 1})
	h := e.start(t)
	revoke := func(id string) string { return "/v1/admin/groups/ghost/members/" + id + "/revoke" }
	// The group exists (an admin's config makes it): an unknown group is
	// 404 (TestMemberRevokeOfAnUnknownGroupIsNotFound).
	h.call(t, "PUT", "/v1/admin/groups/ghost/config", e.adminToken, map[string]any{"max_moves_per_second": 5}, http.StatusOK, nil)
	for _, n := range []int{1, 255, 256, 272} {
		h.expectError(t, "POST", revoke(strings.Repeat("c", n)), e.adminToken, nil, http.StatusConflict, api.CodeUnknownMember)
	}
	for _, id := range []string{strings.Repeat("c", 273), "a%20b", "%C3%A9"} {
		h.expectError(t, "POST", revoke(id), e.adminToken, nil, http.StatusBadRequest, api.CodeBadRequest)
	}
}

// TestJoinWhoseAnswerFailsLeavesNoMember: when minting the answer of a
// join fails after the machine made the member (here the minter's
// entropy source fails), the join answers 500 internal, the member is
// gone again (it held every partition, and nobody could ever use or
// name it), and the cause is logged at ERROR.
func TestJoinWhoseAnswerFailsLeavesNoMember(t *testing.T) {
	e := newEnv(t, map[string]int32{"demo": 12})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := coordinator.New(e.cfg, e.log, coordinator.WithListener(ln), coordinator.WithBroker(e.broker),
		coordinator.WithRand(rand.New(rand.NewPCG(1, 7))))
	if err != nil {
		t.Fatal(err)
	}
	cred, err := coordinator.BreakMinting(c, []string{"ghost"}, []string{"demo"})
	if err != nil {
		t.Fatal(err)
	}
	e.remember(cred)
	h := &harness{env: e, c: c, base: c.URL(), done: make(chan error, 1), client: &http.Client{Timeout: 30 * time.Second}}
	go func() { h.done <- c.Run(context.Background()) }()
	t.Cleanup(func() { h.stop(t) })

	h.expectError(t, "POST", "/v1/groups/ghost/join", cred, api.JoinRequest{Topics: []string{"demo"}, ClientID: "svc"},
		http.StatusInternalServerError, api.CodeInternal)
	d := h.describe(t, "ghost")
	if len(d.Members) != 0 {
		t.Fatalf("a join answered 500 left members %+v", d.Members)
	}
	logged := e.logs.FilterLevelExact(zapcore.ErrorLevel).FilterMessageSnippet("join").All()
	if len(logged) != 1 {
		t.Fatalf("%d ERROR lines for the failed join, want 1: %+v", len(logged), e.logs.All())
	}
	fields := logged[0].ContextMap()
	if fields["group"] != "ghost" || !strings.HasPrefix(fields["member_id"].(string), "svc-") ||
		!strings.Contains(fields["error"].(string), "entropy source failed") || fields["member_removed"] != true {
		t.Fatalf("ERROR line %q %v does not name the group, member, cause and removal", logged[0].Message, fields)
	}
	e.checkLogs(t)
}
