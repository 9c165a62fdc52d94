package coordinator_test

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// A tenant joining and leaving under ever new group names made the
// coordinator hold every group forever. A group left empty (no members,
// no offsets) is forgotten after empty_group_ttl — in the store too — and
// the epochs it granted are never granted again, across a restart.
func TestEmptyGroupsAreReapedOverHTTP(t *testing.T) {
	e := newEnv(t, map[string]int32{"t": 2})
	e.cfg.Groups.Limits.EmptyGroupTTL = 11 * time.Minute
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	advance := func(d time.Duration) { clock.Add(int64(d)) }
	h := e.start(t, coordinator.WithClock(now))
	cred := h.clientCredential(t, []string{"*"}, []string{"*"})
	m := h.join(t, "churn", cred, api.JoinRequest{Topics: []string{"t"}})
	h.call(t, "POST", "/v1/groups/churn/leave", m.token, api.LeaveRequest{}, 200, nil)
	var highest uint64
	for _, p := range h.describe(t, "churn").Partitions {
		highest = max(highest, p.Epoch)
	}
	poke := func() { // any request steps the machine at the coordinator's clock, running due timers
		h.join(t, "live", cred, api.JoinRequest{Topics: []string{"t"}, SessionTimeoutMs: 300_000})
	}
	for range 12 {
		advance(3 * time.Minute)
		poke()
	}
	var names coordinator.GroupsResponse
	h.call(t, "GET", "/v1/admin/groups", e.adminToken, nil, 200, &names)
	if slices.Contains(names.Groups, "churn") {
		t.Fatalf("group churn still held 36 min after it emptied: %v", names.Groups)
	}
	h.stop(t)
	h = e.start(t, coordinator.WithClock(now))
	h.call(t, "GET", "/v1/admin/groups", e.adminToken, nil, 200, &names)
	if slices.Contains(names.Groups, "churn") {
		t.Fatal("the reaped group came back from the store")
	}
	h.join(t, "churn", cred, api.JoinRequest{Topics: []string{"t"}})
	for _, p := range h.describe(t, "churn").Partitions {
		if p.OwnerEpoch <= highest {
			t.Fatalf("partition %d granted at epoch %d after a restart, at or below the forgotten %d", p.Partition, p.OwnerEpoch, highest)
		}
	}
}
