package sdk_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestAdminRevokeMember: an admin revokes a whole member
// (POST /v1/admin/groups/{g}/members/{id}/revoke). The SDK sees
// unknown_member (or 409s from the gateways), loses its partitions
// without committing (OnLost) and rejoins under a new member id; the
// group settles again. Nothing is lost; the only repeats are records the
// revoked incarnation was handed after its last confirmed commit.
func TestAdminRevokeMember(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 12})
	load := c.StartLoad(t, sdk.LoadOptions{Interval: 10 * time.Millisecond})
	opts := func(name string) sdk.MemberOptions {
		return sdk.MemberOptions{Name: name, Group: "evict", CommitInterval: 100 * time.Millisecond}
	}
	members := []*sdk.Member{c.NewMember(t, opts("m1")), c.NewMember(t, opts("m2"))}
	awaitSplit(t, c, "evict", members, 6)
	flowing(t, members, 300)

	victim := members[0]
	old := victim.Consumer.MemberID()
	held := victim.Assigned()
	var answer coordinator.MemberRevokeResponse
	if status, raw := c.Admin(t, http.MethodPost, "/v1/admin/groups/evict/members/"+old+"/revoke", struct{}{}, &answer); status != http.StatusOK {
		t.Fatalf("revoke member: %d %s", status, raw)
	}
	acked := victim.Acked()
	if answer.Fenced != len(held) {
		t.Errorf("fenced %d partitions, the member held %v", answer.Fenced, held)
	}
	sdk.Eventually(t, wait, "the victim rejoined under a new id and the group settled", func() (bool, string) {
		if id := victim.Consumer.MemberID(); id == old {
			return false, "not rejoined yet"
		}
		if ok, why := c.Settled(t, "evict", 2); !ok {
			return false, why
		}
		n := len(members[0].Assigned()) + len(members[1].Assigned())
		return n == int(c.Partitions), fmt.Sprintf("%d partitions fetched", n)
	})
	flowing(t, members, 300)
	load.Stop()
	end := c.LogEnd(t)
	ledger := sdk.WaitDelivered(t, wait, end, members...)
	dups := ledger.Duplicates(t, end)
	ledger.Exclusive(t, c.Partitions)
	lost := 0
	for _, h := range victim.Hooks() {
		if h.Kind == sdk.HookLost {
			lost += len(h.Partitions)
		}
	}
	if lost != len(held) {
		t.Errorf("OnLost named %d partitions, the member held %v", lost, held)
	}
	total := 0
	for p, offsets := range dups {
		total += len(offsets)
		for o := range offsets {
			if o < acked[p] {
				t.Errorf("partition %d: offset %d repeated although the victim's commit up to %d was confirmed", p, o, acked[p])
			}
		}
	}
	t.Logf("member %s revoked (%d partitions fenced), rejoined as %s; %d records repeated", old, answer.Fenced, victim.Consumer.MemberID(), total)
}
