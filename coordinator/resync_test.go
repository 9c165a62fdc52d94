package coordinator_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// resyncHeartbeat is m's heartbeat saying resync: true, as the SDK sends
// it after a heartbeat whose answer it did not get.
func resyncHeartbeat(t *testing.T, m *member, waitMs int64) (api.HeartbeatResponse, time.Duration) {
	t.Helper()
	m.resync = true
	defer func() { m.resync = false }()
	start := time.Now()
	resp := m.heartbeat(t, waitMs)
	return resp, time.Since(start)
}

// TestResyncBringsBackGrantLostOnTheWire: b's heartbeat answer carrying
// the grant of the partition a released is read off the socket and
// dropped (a client timeout, a reset). b's next heartbeat says resync:
// it carries that partition at once (wait_ms 10 s, answered well before
// heartbeat_wait), at the epoch b owns, with b's capability, as a
// renewal — not after half the default 60 s lease (29.6 s and 59 empty
// heartbeats measured before, hbgrant.md). Nothing moves: owner and
// epoch stay.
func TestResyncBringsBackGrantLostOnTheWire(t *testing.T) {
	h, _, a, b, moved := startToggled(t, nil) // default 60 s capability_lease
	a.releaseAll(t, []api.PartitionRef{moved}, func(api.PartitionRef) int64 { return 0 })
	lost := rawHeartbeat(t, h, b, 10_000)
	if _, ok := carries(lost, moved); !ok {
		t.Fatalf("the lost answer %+v does not carry %v: nothing was lost", lost, moved)
	}
	epoch := ownedBy(t, h, b.id, moved)
	if epoch == 0 {
		t.Fatalf("%v is not b's: %+v", moved, h.describe(t, "g").Partitions)
	}

	resp, took := resyncHeartbeat(t, b, 10_000)
	g, ok := carries(resp, moved)
	// At once: before the hold (heartbeat_wait) would have ended. Without
	// the resync the answer is empty after the hold; a tighter bound
	// only measures the machine's load.
	if !ok || took >= h.env.cfg.Groups.HeartbeatWait {
		t.Fatalf("b's resync heartbeat (after %s) carries %+v, want %v at once", took, resp, moved)
	}
	t.Logf("the lost grant came back after %s (resync)", took)
	claims := claimsOf(t, g.Capability)
	if g.Epoch != epoch || claims["ep"] != float64(epoch) || claims["sub"] != b.id || claims["tp"] != moved.Topic || claims["pt"] != float64(moved.Partition) {
		t.Fatalf("resent %+v with claims %v, want b's capability for %v at epoch %d", g, claims, moved, epoch)
	}
	if len(resp.Revoke) != 0 || len(resp.Grants)+len(resp.Renew) != 1 {
		t.Fatalf("b's resync answer %+v, want only what b owns (%v)", resp, moved)
	}
	if again := ownedBy(t, h, b.id, moved); again != epoch {
		t.Fatalf("after the resync b owns %v at epoch %d, want %d: nothing may move", moved, again, epoch)
	}
	if status, body := b.commit(t, moved.Topic, moved.Partition, 0, false); status != http.StatusOK {
		t.Fatalf("b's commit with the resent capability: %d %s, want 200", status, body)
	}
	// Resync is asked for once: the next plain heartbeat holds again.
	if resp := b.heartbeat(t, 300); len(resp.Grants)+len(resp.Renew)+len(resp.Revoke) != 0 {
		t.Fatalf("b's plain heartbeat after the resync carries %+v, want nothing", resp)
	}
	h.env.checkLogs(t)
}

// TestResyncBringsBackRevokeLostOnTheWire: a's heartbeat answer revoking
// the partition that moves to b is lost on the wire. a's next heartbeat
// says resync: it carries the revoke again at once (same epoch), and
// a's other partition as a renewal; a releases, and b gets its grant.
// Before, a learned of the revoke only from a gateway's 409 on its next
// fetch — an idle a never — and b waited handoff_timeout.
func TestResyncBringsBackRevokeLostOnTheWire(t *testing.T) {
	h, _, a, b := startPair(t, nil)
	lost := rawHeartbeat(t, h, a, 5000)
	if len(lost.Revoke) != 1 {
		t.Fatalf("a's lost answer %+v, want one revoke", lost)
	}
	moved := lost.Revoke[0]

	resp, took := resyncHeartbeat(t, a, 10_000)
	if len(resp.Revoke) != 1 || resp.Revoke[0] != moved || took >= h.env.cfg.Groups.HeartbeatWait { // at once: before the hold ends
		t.Fatalf("a's resync heartbeat (after %s) carries %+v, want the revoke %v at once", took, resp, moved)
	}
	if len(resp.Grants) != 0 || len(resp.Renew) != 1 || resp.Renew[0].Partition == moved.Partition {
		t.Fatalf("a's resync answer %+v, want a renewal of the partition a keeps", resp)
	}
	held := b.heldHeartbeat(10_000)
	a.releaseAll(t, resp.Revoke, func(api.PartitionRef) int64 { return 0 })
	if _, ok := carries((<-held).must(t), moved); !ok {
		t.Fatalf("b got no grant of %v after a released it", moved)
	}
	h.env.checkLogs(t)
}

// TestResyncOfMemberOwningNothing: a resync from a member that owns
// nothing (c, the third member of a group of 2 partitions) answers
// nothing extra: held as any heartbeat, empty lists.
func TestResyncOfMemberOwningNothing(t *testing.T) {
	h, _, a, b, moved := startToggled(t, nil)
	a.releaseAll(t, []api.PartitionRef{moved}, func(api.PartitionRef) int64 { return 0 })
	b.heartbeat(t, 5000)
	cred := h.clientCredential(t, []string{"g"}, []string{"demo"})
	c := h.join(t, "g", cred, api.JoinRequest{Topics: []string{"demo"}, ClientID: "c"})
	resp, took := resyncHeartbeat(t, c, 300)
	if len(resp.Revoke)+len(resp.Grants)+len(resp.Renew) != 0 || took < 300*time.Millisecond {
		t.Fatalf("c (owning nothing) resync answer after %s: %+v, want empty after wait_ms", took, resp)
	}
}
