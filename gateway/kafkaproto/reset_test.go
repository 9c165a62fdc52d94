package kafkaproto

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/session"
)

// An administrator's offsets reset of a partition the member holds: the
// coordinator fences the holder (a revoke of its epoch) and grants the
// partition back from the reset offset under the next epoch at once,
// without waiting for a release. Before, the member took the regrant as
// moot (its held revoke dropped): the client kept the partition
// unannounced, read on from its own position, and its next commit went
// to the coordinator with the new capability, undoing the reset. Now the
// client is told again (retell): the partition leaves its assignment
// until it gave it up, its commits from the old position are refused as
// stale, its fetches pause, and it gets the partition back — reading from
// the committed (reset) offset. These tests play the coordinator
// (refence_test.go's scriptedCoordinator).

// TestResetRegrantIsToldAgain: the reset's revoke and regrant arrive in
// one heartbeat answer while the client reads p0 at 5.
func TestResetRegrantIsToldAgain(t *testing.T) {
	c, m := startScriptedMember(t)
	if code := <-commitInBackground(m, refenceP0, 5); code != "" {
		t.Fatalf("commit: %q", code)
	}
	h := c.next(t, "heartbeat")
	reset := fence(1, refenceP0)
	reset.Grants = []api.Grant{grantAt(2, refenceP0, 2)}
	h.reply(t, reset)
	c.next(t, "heartbeat") // the answer was stepped
	resetIsToldAgain(t, m, 2)
}

// TestResetRegrantAloneIsToldAgain: the regrant comes without the revoke
// (the answer carrying both was lost and the coordinator's resync sends
// only what holds now: the grant).
func TestResetRegrantAloneIsToldAgain(t *testing.T) {
	c, m := startScriptedMember(t)
	if code := <-commitInBackground(m, refenceP0, 5); code != "" {
		t.Fatalf("commit: %q", code)
	}
	h := c.next(t, "heartbeat")
	h.reply(t, api.HeartbeatResponse{Grants: []api.Grant{grantAt(2, refenceP0, 9)}})
	c.next(t, "heartbeat")
	resetIsToldAgain(t, m, 9)
}

// TestResetDuringACarryOverIsToldAgain: a reset fences the partition
// while a carry-over's refence is in flight, so its revoke counts as the
// carry-over's fence; the regrant starts from an offset the member never
// committed (the reset's), so the client is told again all the same —
// while the other partition, regranted from the offset the member
// committed, stays the client's unannounced (the carry-over's own
// regrant).
func TestResetDuringACarryOverIsToldAgain(t *testing.T) {
	m := carriedOverFrom(t, 3) // the reset's offset, not the member's 5
	resetIsToldAgain(t, m, 3)
}

// TestCarryOverRegrantAtTheCommittedOffsetIsKept: the carry-over's own
// regrant from the offset the member committed stays the client's.
func TestCarryOverRegrantAtTheCommittedOffsetIsKept(t *testing.T) {
	m := carriedOverFrom(t, 5)
	clientKeeps(t, m, "after the carry-over's regrant from the committed offset")
	if code := <-commitInBackground(m, refenceP0, 8); code != "" {
		t.Errorf("the client's commit after the carry-over was answered %q, want committed", code)
	}
}

// carriedOverFrom: the client commits 5 of p0, re-authenticates (a
// carry-over fences both partitions), and the coordinator grants them
// back, p1 from the offset committed (0) and p0 from offset.
func carriedOverFrom(t *testing.T, offset int64) *member {
	t.Helper()
	c, m := startScriptedMember(t)
	if code := <-commitInBackground(m, refenceP0, 5); code != "" {
		t.Fatalf("commit: %q", code)
	}
	h := carriedOver(t, c, m, refenceP0, refenceP1)
	regrant := grants(2, refenceP1)
	regrant.Grants = append(regrant.Grants, grantAt(2, refenceP0, offset))
	h.reply(t, regrant)
	c.next(t, "heartbeat") // the answer was stepped
	return m
}

// resetIsToldAgain checks the member after p0 was granted again from
// offset under the client (p1 untouched): the client is told to give p0
// up, its fetches of p0 pause and its commit from the old position is
// refused as stale (the session's committed offset stays the reset's);
// once it gave p0 up it gets it again, a commit from before that is
// refused as stale, and one under the new assignment is committed.
func resetIsToldAgain(t *testing.T, m *member, offset int64) {
	t.Helper()
	if gone := toldToGiveUp(t, m); !slices.Equal(gone, []session.Partition{refenceP0}) {
		t.Fatalf("the client was told to give up %v, want %v alone", gone, refenceP0)
	}
	if token, paused := m.capability(refenceP0); token != "" || !paused {
		t.Errorf("the client's fetch of the reset partition is admitted with %q (paused %v), want paused", token, paused)
	}
	before := m.currentEpoch()
	if code := <-commitInBackground(m, refenceP0, 20); code != api.CodeStaleEpoch {
		t.Fatalf("the commit from the position before the reset was answered %q, want %q", code, api.CodeStaleEpoch)
	}
	if c, _ := m.committed(refenceP0); c != offset {
		t.Fatalf("committed %d after the refused commit, want the reset's %d", c, offset)
	}
	_, assignment, code := m.heartbeat848(m.currentEpoch(), map[session.Partition]bool{refenceP1: true}, time.Now())
	if code != 0 || !slices.Equal(assignment, []session.Partition{refenceP0, refenceP1}) {
		t.Fatalf("after the client gave p0 up it was assigned %v (error %d), want both again", assignment, code)
	}
	if token, paused := m.capability(refenceP0); token == "" || paused {
		t.Errorf("once handed again the client's fetch of p0 is admitted with %q (paused %v), want the capability", token, paused)
	}
	if code := <-commitAt(m, before, refenceP0, 20); code != api.CodeStaleEpoch {
		t.Errorf("a commit of p0 under the epoch before it was handed again was answered %q, want %q", code, api.CodeStaleEpoch)
	}
	if code := <-commitInBackground(m, refenceP0, offset+1); code != "" {
		t.Errorf("a commit after the client read from the reset offset was answered %q, want committed", code)
	}
	if c, _ := m.committed(refenceP0); c != offset+1 {
		t.Errorf("committed %d, want %d", c, offset+1)
	}
}

// TestResetToldAgainToAnEagerClient: a classic eager client (KafkaJS)
// told to rejoin gives everything up and gets the same assignment in its
// next generation. A commit of the reset partition under the generation
// before (accepted as a commit racing its own rejoin) is from its
// pre-reset position: refused, though the partition is in the
// assignment of both generations.
func TestResetToldAgainToAnEagerClient(t *testing.T) {
	c, m := startScriptedMember(t)
	h := c.next(t, "heartbeat")
	reset := fence(1, refenceP0)
	reset.Grants = []api.Grant{grantAt(2, refenceP0, 2)}
	h.reply(t, reset)
	c.next(t, "heartbeat")
	before := m.currentEpoch()
	if code := m.heartbeatClassic(before, time.Now()); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("the client's heartbeat was answered %d, want REBALANCE_IN_PROGRESS", code)
	}
	generation, code := m.joinClassic(map[session.Partition]bool{}, time.Now()) // eager: owns nothing
	if code != 0 {
		t.Fatalf("join: %d", code)
	}
	if assignment, code := m.syncClassic(generation, time.Now()); code != 0 || !slices.Equal(assignment, []session.Partition{refenceP0, refenceP1}) {
		t.Fatalf("the client was assigned %v (error %d), want both again", assignment, code)
	}
	if code := <-commitAt(m, before, refenceP0, 20); code != api.CodeStaleEpoch {
		t.Errorf("a commit of p0 under the generation before the rejoin was answered %q, want %q", code, api.CodeStaleEpoch)
	}
	if code := <-commitAt(m, before, refenceP1, 1); code != "" {
		t.Errorf("a commit of p1, not reset, under the generation before the rejoin was answered %q, want committed", code)
	}
	if code := <-commitAt(m, generation, refenceP0, 3); code != "" {
		t.Errorf("a commit of p0 under the new generation was answered %q, want committed", code)
	}
}

// TestResetRevokeBeforeItsRegrantIsToldAgain: the reset's revoke comes a
// heartbeat before its regrant, and the client is handed the assignment
// without the partition in between — but has not given it up yet when
// the regrant comes. Before, the regrant dropped the held revoke, the
// partition went back into the assignment as if nothing happened, and
// the client's commit of its pre-reset position was taken (kgo KIP-848,
// 1 run in 6 of TestAdminResetTellsAKgoMember under load).
func TestResetRevokeBeforeItsRegrantIsToldAgain(t *testing.T) {
	c, m := startScriptedMember(t)
	h := c.next(t, "heartbeat")
	h.reply(t, fence(1, refenceP0))
	h = c.next(t, "heartbeat")
	both := map[session.Partition]bool{refenceP0: true, refenceP1: true}
	_, assignment, code := m.heartbeat848(m.currentEpoch(), both, time.Now())
	if code != 0 || !slices.Equal(assignment, []session.Partition{refenceP1}) {
		t.Fatalf("after the revoke the client was assigned %v (error %d), want p1 alone", assignment, code)
	}
	h.reply(t, api.HeartbeatResponse{Grants: []api.Grant{grantAt(2, refenceP0, 2)}})
	c.next(t, "heartbeat")
	if _, assignment, _ := m.heartbeat848(m.currentEpoch(), both, time.Now()); slices.Contains(assignment, refenceP0) {
		t.Fatalf("the client, still owning p0 from before the reset, was assigned %v: it keeps its position", assignment)
	}
	before := m.currentEpoch()
	if code := <-commitInBackground(m, refenceP0, 20); code != api.CodeStaleEpoch {
		t.Fatalf("the commit from the position before the reset was answered %q, want %q", code, api.CodeStaleEpoch)
	}
	_, assignment, code = m.heartbeat848(m.currentEpoch(), map[session.Partition]bool{refenceP1: true}, time.Now())
	if code != 0 || !slices.Equal(assignment, []session.Partition{refenceP0, refenceP1}) {
		t.Fatalf("after the client gave p0 up it was assigned %v (error %d), want both again", assignment, code)
	}
	if code := <-commitAt(m, before, refenceP0, 20); code != api.CodeStaleEpoch {
		t.Errorf("a commit of p0 under an epoch before it was handed again was answered %q, want %q", code, api.CodeStaleEpoch)
	}
	if c, _ := m.committed(refenceP0); c != 2 {
		t.Errorf("committed %d, want the reset's 2", c)
	}
}
