package sdk_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestAdminRevoke: an admin revokes one partition of a consumer mid-stream
// (POST /v1/admin/groups/{g}/partitions/{t}/{p}/revoke). Once the revoke
// answered, the consumer's next fetch under the old epoch, if it sends one
// at all (the heartbeat revoke may come first), is refused 409: every
// record of the old epoch it delivers was fetched before the answer. The
// partition is handed over (new epoch) and nothing is lost or repeated.
func TestAdminRevoke(t *testing.T) {
	t.Parallel()
	c, load, members := startRevokeGroup(t, "revoke", sdk.DefaultTiming())

	victim := members[0]
	p := victim.Assigned()[0]
	old := partitionOf(t, c.Describe(t, "revoke"), p)
	var answer coordinator.RevokeResponse
	status, raw := c.Admin(t, http.MethodPost, fmt.Sprintf("/v1/admin/groups/revoke/partitions/%s/%d/revoke", c.Topic, p),
		coordinator.RevokeRequest{Reason: "e2e"}, &answer)
	answered := time.Now()
	if status != http.StatusOK || answer.Epoch <= old.Epoch {
		t.Fatalf("revoke: %d %s (epoch before %d)", status, raw, old.Epoch)
	}
	ledger := finishRevoke(t, c, load, members, p, old.Epoch, answer.Epoch, answered)
	var lastOld time.Time
	for _, d := range victim.Deliveries() {
		if d.Partition == p && d.Epoch <= old.Epoch && d.At.After(lastOld) {
			lastOld = d.At
		}
	}
	stints := ledger.Stints(p)
	next := stints[len(stints)-1]
	t.Logf("partition %d revoked from %s at epoch %d: last old-epoch record delivered %v after the answer; handed to %s at epoch %d from offset %d",
		p, victim.Name, old.Epoch, lastOld.Sub(answered).Round(time.Microsecond), next.Member, next.Epoch, next.First.Offset)
}

// startRevokeGroup starts a cluster of 12 partitions under load (a
// record every 5 ms) and two members of group splitting them, reading.
func startRevokeGroup(t *testing.T, group string, timing sdk.Timing) (*sdk.Cluster, *sdk.Load, []*sdk.Member) {
	t.Helper()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 12, Timing: timing})
	load := c.StartLoad(t, sdk.LoadOptions{Interval: 5 * time.Millisecond})
	members := []*sdk.Member{
		c.NewMember(t, sdk.MemberOptions{Name: "m1", Group: group}),
		c.NewMember(t, sdk.MemberOptions{Name: "m2", Group: group}),
	}
	awaitSplit(t, c, group, members, 6)
	flowing(t, members, 300)
	return c, load, members
}

// finishRevoke waits until partition p, revoked from members[0] at epoch
// old (the answer came at answered), is read under epoch or later, then
// stops the load and checks every delivery: each record exactly once,
// in order, one reader a partition at a time, and the victim stopped
// within one fetch of the answer. It returns the ledger.
func finishRevoke(t *testing.T, c *sdk.Cluster, load *sdk.Load, members []*sdk.Member, p int32, old, epoch uint64, answered time.Time) *sdk.Ledger {
	t.Helper()
	sdk.Eventually(t, wait, "the partition consumed under the new epoch", func() (bool, string) {
		for _, d := range sdk.NewLedger(members...).Of(p) {
			if d.Epoch >= epoch {
				return true, ""
			}
		}
		return false, "no record under the new epoch yet"
	})
	flowing(t, members, 300)
	load.Stop()
	end := c.LogEnd(t)
	ledger := sdk.WaitDelivered(t, wait, end, members...)
	ledger.ExactlyOnce(t, end)
	ledger.Sequential(t, end)
	ledger.Exclusive(t, c.Partitions)
	checkStoppedWithinOneFetch(t, members[0], p, old, answered)
	return ledger
}

// checkStoppedWithinOneFetch: the victim's fetches of p under an epoch at
// or below old sent after the revoke answered are at most what the SDK
// keeps in flight per partition (two: client.Config.FetchAhead starts the
// next fetch as soon as the one before names its offset, so both may have
// left before the 409 of the first came back), each refused 409
// capability_revoked or cancelled by the SDK when the heartbeat revoke
// overtook it; none returned records (the safety property).
func checkStoppedWithinOneFetch(t *testing.T, victim *sdk.Member, p int32, old uint64, answered time.Time) {
	t.Helper()
	var after []sdk.FetchCall
	for _, f := range victim.Transport.Fetches() {
		if f.Partition == p && f.Epoch <= old && f.Sent.After(answered) {
			after = append(after, f)
		}
	}
	const inFlight = 2 // per partition with FetchAhead, the SDK's default
	if len(after) > inFlight {
		t.Errorf("%d fetches of partition %d under epoch ≤ %d after the revoke answered, want at most %d (the SDK's fetches in flight)", len(after), p, old, inFlight)
	}
	for _, f := range after {
		if f.Status != http.StatusConflict && f.Status != 0 {
			t.Errorf("fetch of partition %d at %d under epoch %d after the revoke answered: status %d %s, want 409 (or cancelled)",
				p, f.Offset, f.Epoch, f.Status, f.Body)
		}
		t.Logf("fetch under the old epoch sent %v after the answer: status %d %s%s",
			f.Sent.Sub(answered).Round(time.Microsecond), f.Status, f.Body, f.Err)
	}
	t.Logf("fetches under the old epoch after the revoke answered: %d (0: stopped by the heartbeat revoke, or by the 409 of the fetch in flight)", len(after))
}

func partitionOf(t *testing.T, d coordinator.GroupDescription, p int32) coordinator.PartitionView {
	t.Helper()
	for _, v := range d.Partitions {
		if v.Partition == p {
			return v
		}
	}
	t.Fatalf("partition %d not in the group description", p)
	return coordinator.PartitionView{}
}

// TestAdminRevokeFetchFirst holds the victim's heartbeats back so that the
// gateway's 409 reaches it before the heartbeat revoke: the SDK then
// releases the partition with its old capability on the 409 alone, and
// the coordinator completes the handoff on that release (handoff_timeout
// is 60s here, so nothing else can complete it).
func TestAdminRevokeFetchFirst(t *testing.T) {
	t.Parallel()
	timing := sdk.DefaultTiming()
	timing.HandoffTimeout = time.Minute
	timing.CapabilityLease = 20 * time.Second // no renewal needed while heartbeats are held
	c, load, members := startRevokeGroup(t, "fetchfirst", timing)

	victim := members[0]
	p := victim.Assigned()[0]
	release := victim.Transport.Hold("heartbeat")
	defer release()
	sdk.Eventually(t, wait, "the victim's held heartbeat answered", func() (bool, string) {
		n := victim.Transport.InFlight("heartbeat")
		return n == 0, fmt.Sprintf("%d heartbeats in flight", n)
	})
	old := partitionOf(t, c.Describe(t, "fetchfirst"), p)
	var answer coordinator.RevokeResponse
	status, raw := c.Admin(t, http.MethodPost, fmt.Sprintf("/v1/admin/groups/fetchfirst/partitions/%s/%d/revoke", c.Topic, p),
		coordinator.RevokeRequest{Reason: "e2e"}, &answer)
	answered := time.Now()
	if status != http.StatusOK {
		t.Fatalf("revoke: %d %s", status, raw)
	}
	sdk.Eventually(t, wait, "the handoff completed on the release", func() (bool, string) {
		v := partitionOf(t, c.Describe(t, "fetchfirst"), p)
		return v.State == "owned" && v.Epoch >= answer.Epoch, fmt.Sprintf("partition %d %s at epoch %d", p, v.State, v.Epoch)
	})
	completed := time.Now()
	refused := 0
	for _, f := range victim.Transport.Fetches() {
		if f.Partition == p && f.Epoch <= old.Epoch && f.Status == http.StatusConflict {
			refused++
		}
	}
	if refused != 1 {
		t.Errorf("%d fetches of partition %d refused 409 under the old epoch, want 1", refused, p)
	}
	release()
	finishRevoke(t, c, load, members, p, old.Epoch, answer.Epoch, answered)
	t.Logf("revoke answered → handoff completed on the 409 release: %v", completed.Sub(answered).Round(time.Millisecond))
}
