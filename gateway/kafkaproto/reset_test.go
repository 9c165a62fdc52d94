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
	before, generation := toldToRejoin(t, m)
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

// toldToRejoin: a classic eager client's heartbeat is answered
// REBALANCE_IN_PROGRESS and it joins again owning nothing; it returns
// the generations before and after.
func toldToRejoin(t *testing.T, m *member) (before, generation int32) {
	t.Helper()
	before = m.currentEpoch()
	if code := m.heartbeatClassic(before, time.Now()); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("the client's heartbeat was answered %d, want REBALANCE_IN_PROGRESS", code)
	}
	generation, code := m.joinClassic(map[session.Partition]bool{}, time.Now()) // eager: owns nothing
	if code != 0 {
		t.Fatalf("join: %d", code)
	}
	return before, generation
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

// A classic eager client (KafkaJS) owns nothing from its JoinGroup to
// its SyncGroup's answer: it gave everything up to rejoin. What the
// coordinator sends in that window must be taken as for a client holding
// nothing. Before, the member still counted the assignment it last
// handed (m.sent) as the client's until the SyncGroup answer replaced
// it: e2e/kafkaclients TestAdminResetTellsAKafkaJSMember failed 1 run in
// ~20 under load — KafkaJS rejoined on the reset's fence, the reset's
// regrant came between its JoinGroup and SyncGroup, was taken for a
// regrant under a client holding the partition (retell), and the
// SyncGroup answer left the partition out; nothing ever acknowledged the
// retell (only a JoinGroup does, for a classic client), the heartbeat
// found the assignment it expects handed, and the client never read the
// partition again.

// TestResetRegrantBetweenAnEagerClientsJoinAndSync: the reset's fence
// makes the client rejoin; its regrant arrives between the client's
// JoinGroup and SyncGroup. The SyncGroup hands the partition back (the
// client reads it from the committed, reset, offset), and the client is
// not left without it.
func TestResetRegrantBetweenAnEagerClientsJoinAndSync(t *testing.T) {
	c, m := startScriptedMember(t)
	h := c.next(t, "heartbeat")
	h.reply(t, fence(1, refenceP0))
	h = c.next(t, "heartbeat") // the revoke was stepped (held for the client)
	before, generation := toldToRejoin(t, m)
	h.reply(t, api.HeartbeatResponse{Grants: []api.Grant{grantAt(2, refenceP0, 2)}}) // the reset's regrant
	c.next(t, "heartbeat")
	// The client's commit of its position before the reset, sent under
	// the generation before its rejoin, arrives now (it commits before
	// it rejoins; the commit raced the rejoin): the partition was
	// granted again since, so it is from before — refused, the reset's
	// offset stands.
	if code := <-commitAt(m, before, refenceP0, 20); code != api.CodeStaleEpoch {
		t.Errorf("a commit of p0's position before the reset, under the generation before the rejoin, was answered %q, want %q", code, api.CodeStaleEpoch)
	}
	if c, _ := m.committed(refenceP0); c != 2 {
		t.Errorf("p0 committed %d, want the reset's 2", c)
	}
	assignment, code := m.syncClassic(generation, time.Now())
	if code != 0 {
		t.Fatalf("sync: %d", code)
	}
	if !slices.Contains(assignment, refenceP0) {
		// Not handed now: then the client must be told to rejoin for it.
		if code := m.heartbeatClassic(generation, time.Now()); code != kerr.RebalanceInProgress.Code {
			t.Fatalf("the client was assigned %v and its heartbeat answered %d: partition 0, granted to its member, never reaches it", assignment, code)
		}
	}
	if token, paused := m.capability(refenceP0); token == "" || paused {
		t.Errorf("the client's fetch of p0 after the rejoin is admitted with %q (paused %v), want the regrant's capability", token, paused)
	}
	if code := <-commitAt(m, generation, refenceP0, 3); code != "" {
		t.Errorf("a commit of p0 read from the reset offset under the new generation was answered %q, want committed", code)
	}
}

// TestRevokeBetweenAnEagerClientsJoinAndSync: a revoke arriving between
// the client's JoinGroup and SyncGroup is of a partition the client no
// longer owns: it is released at once. Before, it was held for the
// client to give the partition up, the SyncGroup left the partition out,
// the heartbeat found nothing to change, and the release waited for the
// client's rebalance timeout (here a minute; KafkaJS's default).
func TestRevokeBetweenAnEagerClientsJoinAndSync(t *testing.T) {
	c, m := startScriptedMember(t)
	h := c.next(t, "heartbeat")
	if code := m.heartbeatClassic(m.currentEpoch(), time.Now()); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
	generation, code := m.joinClassic(map[session.Partition]bool{}, time.Now()) // eager: owns nothing
	if code != 0 {
		t.Fatalf("join: %d", code)
	}
	h.reply(t, fence(1, refenceP0)) // p0 moves to another member
	c.next(t, "heartbeat")
	if assignment, code := m.syncClassic(generation, time.Now()); code != 0 || !slices.Equal(assignment, []session.Partition{refenceP1}) {
		t.Fatalf("the client was assigned %v (error %d), want p1 alone", assignment, code)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !released(c, refenceP0) {
		if time.Now().After(deadline) {
			m.mu.Lock()
			_, held := m.deferred[refenceP0]
			m.mu.Unlock()
			t.Fatalf("p0, revoked while the client owned nothing, not released within 10s (revoke held for the client: %v)", held)
		}
		time.Sleep(10 * time.Millisecond) // polling the member's release, sent on its own goroutine
	}
}

// released reports whether the coordinator was sent a release of p.
func released(c *scriptedCoordinator, p session.Partition) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.releases, p)
}
