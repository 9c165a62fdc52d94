package coordinator_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// The audit's attack over HTTP: a credential allowed a-* joins a new
// group, commits one offset and leaves, again and again. It has no live
// member anywhere, but the groups it created count against
// groups_per_credential (409 limit_exceeded), across a restart; another
// tenant still creates groups; an admin delete gives a place back, and
// offsets_retention forgets the groups, offsets and all.
func TestCreatedGroupsBoundedOverHTTP(t *testing.T) {
	e, clock := creatorEnv(t, 6)
	h := e.start(t, clock.option())
	a := h.clientCredential(t, []string{"a-*"}, []string{"*"})
	b := h.clientCredential(t, []string{"b-*"}, []string{"*"})
	req := api.JoinRequest{Topics: []string{"orders"}}
	commitAndLeave := func(group string) {
		t.Helper()
		m := h.join(t, group, a, req)
		if status, body := m.commit(t, "orders", 0, 0, false); status != 200 {
			t.Fatalf("commit in %s: %d %s", group, status, body)
		}
		h.call(t, "POST", "/v1/groups/"+group+"/leave", m.token, api.LeaveRequest{}, 200, nil)
	}
	refused := func(group string) {
		t.Helper()
		status, body, _ := h.do(t, "POST", "/v1/groups/"+group+"/join", a, req)
		d := errorDetails(t, body)
		if status != 409 || errorCode(t, body) != api.CodeLimitExceeded || d["limit"] != "coordinator.groups.limits.groups_per_credential" ||
			!strings.Contains(string(body), "created 2 groups that still exist") {
			t.Fatalf("join %s past the groups A created: %d %s", group, status, body)
		}
	}
	commitAndLeave("a-0")
	commitAndLeave("a-1")
	refused("a-2")
	h.join(t, "b-0", b, req)

	h.stop(t)
	h = e.start(t, clock.option())
	refused("a-2")

	h.call(t, "DELETE", "/v1/admin/groups/a-0", e.adminToken, nil, 200, nil)
	m := h.join(t, "a-2", a, req)
	h.call(t, "POST", "/v1/groups/a-2/leave", m.token, api.LeaveRequest{}, 200, nil)
	refused("a-3")

	for range 12 { // past offsets_retention: any request steps the machine's timers
		clock.add(3 * time.Minute)
		h.join(t, "b-live", b, api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000})
	}
	var names coordinator.GroupsResponse
	h.call(t, "GET", "/v1/admin/groups", e.adminToken, nil, 200, &names)
	if slices.Contains(names.Groups, "a-1") || slices.Contains(names.Groups, "a-2") {
		t.Fatalf("groups held past offsets_retention: %v", names.Groups)
	}
	expired := int64(0)
	for _, entry := range e.logs.FilterMessage("groups reaped").All() {
		expired += entry.ContextMap()["offsets_expired"].(int64)
	}
	if expired != 1 {
		t.Fatalf("logged %d offsets expired, want a-1's one", expired)
	}
	h.join(t, "a-3", a, req)
	h.join(t, "a-4", a, req)
}
