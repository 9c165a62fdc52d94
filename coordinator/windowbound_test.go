package coordinator_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestParkedJoinsAreBoundedPerTenant (redteam17): the join that opens an
// empty group's window is held until it closes (group/window.go), up to
// initial_assign_delay_max — a request, a connection and a goroutine
// each. What one tenant can have held at once is what it may have
// members in: its parked opener is a live member from the moment it is
// parked, so limits.groups_per_credential counts it, and a first join
// into one more group is refused 409 at once, not parked too. Tenant B
// opens its own window beside A's. Fails if the window held joins before
// their member counted (A's fifth first join parked).
func TestParkedJoinsAreBoundedPerTenant(t *testing.T) {
	const places = 3
	e := newEnv(t, map[string]int32{"orders": 2})
	e.cfg.Groups.InitialAssignDelay, e.cfg.Groups.InitialAssignDelayMax = time.Minute, time.Minute // held until the coordinator stops
	e.cfg.Groups.Limits.GroupsPerCredential = places
	e.cfg.ShutdownTimeout = 10 * time.Second
	h := e.start(t)
	credA := h.clientCredential(t, []string{"ga-*"}, []string{"orders"})
	credB := h.clientCredential(t, []string{"gb"}, []string{"orders"})
	var answered atomic.Int64
	join := func(cred, group string) {
		go func() {
			h.try("POST", "/v1/groups/"+group+"/join", cred, api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 60_000})
			answered.Add(1) // a parked one only when the coordinator stops
		}()
	}
	for i := range places {
		join(credA, fmt.Sprintf("ga-%d", i))
	}
	eventually(t, func() string {
		d := h.groupCount(t)
		if d < places {
			return fmt.Sprintf("%d of A's %d first joins parked in their groups' windows", d, places)
		}
		return ""
	})
	for i := places; i < places+2; i++ {
		status, body, _ := h.do(t, "POST", fmt.Sprintf("/v1/groups/ga-%d/join", i), credA, api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 60_000})
		if status != http.StatusConflict || errorCode(t, body) != api.CodeLimitExceeded {
			t.Fatalf("A's first join into a group past its %d held ones: %d %.300s, want 409 limit_exceeded at once", places, status, body)
		}
	}
	join(credB, "gb")
	eventually(t, func() string {
		if d := h.groupCount(t); d != places+1 {
			return fmt.Sprintf("%d groups, want A's %d and B's, each with its parked opener", d, places)
		}
		return ""
	})
	if n := answered.Load(); n != 0 {
		t.Fatalf("%d parked joins answered before their windows closed", n)
	}
}

// groupCount is how many groups the coordinator holds (a group exists
// from its first member's join on).
func (h *harness) groupCount(t *testing.T) int {
	var groups coordinator.GroupsResponse
	h.call(t, "GET", "/v1/admin/groups", h.env.adminToken, nil, http.StatusOK, &groups)
	return len(groups.Groups)
}
