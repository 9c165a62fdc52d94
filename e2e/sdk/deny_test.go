package sdk_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestDeniedCapabilityOfOwnedPartition: an admin denies the jti of a
// member's current capability (POST /v1/admin/capabilities/{jti}/revoke).
// The gateway answers the member's next fetch 409 capability_revoked while
// the coordinator still has the partition owned by that member (no
// revoke, no new epoch): the SDK releases it with the old capability,
// which the coordinator accepts as a plain commit. The partition must not
// be left with nobody reading it.
//
// It found a bug in coordinator/group, since fixed: the machine ignored
// release:true for a partition it still had Owned, so the partition stayed
// owned by a member that gave it up, renewed but never read again.
func TestDeniedCapabilityOfOwnedPartition(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 4})
	load := c.StartLoad(t, sdk.LoadOptions{Interval: 10 * time.Millisecond})
	m := c.NewMember(t, sdk.MemberOptions{Name: "m1", Group: "deny"})
	awaitSplit(t, c, "deny", []*sdk.Member{m}, 4)
	flowing(t, []*sdk.Member{m}, 100)

	var p int32
	var jti string
	for _, f := range m.Transport.Fetches() {
		p, jti = f.Partition, f.JTI
	}
	// The capability read from the last fetch may be renewed (a new jti)
	// before the denial reaches the gateway: the member then never sends
	// the denied one again. Deny the renewed one then, as the
	// administrator would.
	var denied time.Time
	for attempt := 1; ; attempt++ {
		if status, raw := c.Admin(t, http.MethodPost, "/v1/admin/capabilities/"+jti+"/revoke", struct{}{}, nil); status != http.StatusOK {
			t.Fatalf("deny: %d %s", status, raw)
		}
		denied = time.Now()
		renewed := ""
		sdk.Eventually(t, wait, "the member's fetch refused", func() (bool, string) {
			fetches := m.Transport.Fetches()
			for _, f := range fetches {
				if f.JTI == jti && f.Status == http.StatusConflict {
					t.Logf("partition %d refused: %s", f.Partition, f.Body)
					return true, ""
				}
			}
			for _, f := range fetches {
				if f.Partition == p && f.JTI != jti && f.Sent.After(denied) && f.Status == http.StatusOK {
					renewed = f.JTI
					return true, ""
				}
			}
			return false, "no 409 yet"
		})
		if renewed == "" {
			break
		}
		if attempt == 5 {
			t.Fatalf("partition %d: each of 5 denied capabilities was renewed before the gateway refused it", p)
		}
		t.Logf("partition %d's capability %s was renewed (%s) before the denial reached the gateway: deny that one", p, jti, renewed)
		jti = renewed
	}
	sdk.Eventually(t, wait, fmt.Sprintf("partition %d consumed again after the denial", p), func() (bool, string) {
		for _, d := range m.Deliveries() {
			if d.Partition == p && d.At.After(denied) {
				for _, f := range m.Transport.Fetches() {
					if f.Partition == p && f.JTI != jti && f.Sent.After(denied) && f.Status == http.StatusOK {
						return true, ""
					}
				}
			}
		}
		v := partitionOf(t, c.Describe(t, "deny"), p)
		return false, fmt.Sprintf("coordinator: %s by %s at epoch %d; member fetches %v", v.State, v.Owner, v.Epoch, m.Assigned())
	})
	load.Stop()
	end := c.LogEnd(t)
	ledger := sdk.WaitDelivered(t, wait, end, m)
	ledger.ExactlyOnce(t, end)
}
