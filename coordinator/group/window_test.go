package group_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/group"
)

// windowOn turns the join window on (window.go): 50 ms of quiet, at most
// 300 ms in all.
func windowOn(c *group.Config) {
	c.InitialAssignDelay = 50 * time.Millisecond
	c.InitialAssignDelayMax = 300 * time.Millisecond
}

// joinHeld joins a member and parks its heartbeat, checking that its join
// answer granted nothing.
func joinHeld(t *testing.T, w *world, instance string) string {
	t.Helper()
	id := w.join("g", instance, "t")
	if got := w.clients[id].grants; len(got) != 0 {
		t.Fatalf("join of %s inside the window granted %d partitions", instance, len(got))
	}
	w.heartbeat(id)
	return id
}

// grantsPerPartition counts every capability the machine granted, per
// partition.
func grantsPerPartition(w *world) map[pkey]int {
	out := make(map[pkey]int)
	for k, grants := range w.tokens {
		out[k] = len(grants)
	}
	return out
}

// TestJoinWindowAssignsTheStormOnce: members joining an empty group 40 ms
// apart are answered at once with no grants; each join extends the quiet
// time, and when 50 ms pass without one the group is assigned once: every
// member gets its share as news on its held heartbeat, every partition is
// granted exactly once at epoch 1, and nothing is revoked. Without the
// window the first member is granted all 12 and hands 9 back.
func TestJoinWindowAssignsTheStormOnce(t *testing.T) {
	w := newWorld(t, windowOn)
	w.topics(map[string]int32{"t": 12})
	var ids []string
	for i := range 4 {
		if i > 0 {
			w.advance(40 * time.Millisecond)
		}
		ids = append(ids, joinHeld(t, w, fmt.Sprintf("m%d", i)))
		if n := len(w.owners("g")); n != 0 {
			t.Fatalf("after join %d: %d partitions owned inside the window", i, n)
		}
	}
	w.advance(49 * time.Millisecond) // 1 ms before the quiet time is over
	if n := len(w.owners("g")); n != 0 {
		t.Fatalf("%d partitions owned 49 ms after the last join", n)
	}
	msgs := w.advance(time.Millisecond)
	for _, id := range ids {
		if got := grantsFor(msgs, id); len(got) != 3 {
			t.Fatalf("%s: %d grants when the window closed, want 3", id, len(got))
		}
		if len(w.clients[id].revoked) != 0 {
			t.Fatalf("%s: revoked %v", id, w.clients[id].revoked)
		}
	}
	per := grantsPerPartition(w)
	if len(per) != 12 {
		t.Fatalf("%d partitions granted, want 12", len(per))
	}
	for k, n := range per {
		if n != 1 {
			t.Fatalf("%v granted %d times, want once", k, n)
		}
	}
	for p, e := range w.epochs("g") {
		if e != 1 {
			t.Fatalf("%v at epoch %d, want 1", p, e)
		}
	}
}

// TestJoinWindowClosesByItsMax: joins that never stop keep the quiet time
// moving, but the window closes initial_assign_delay_max after it opened:
// the last join, at 280 ms, would be quiet until 330 ms.
func TestJoinWindowClosesByItsMax(t *testing.T) {
	w := newWorld(t, windowOn)
	w.topics(map[string]int32{"t": 16})
	joinHeld(t, w, "m0")
	for i := 1; i <= 7; i++ { // 40, 80, … 280 ms: every gap under the quiet time
		w.advance(40 * time.Millisecond)
		joinHeld(t, w, fmt.Sprintf("m%d", i))
	}
	w.advance(19 * time.Millisecond) // 299 ms
	if n := len(w.owners("g")); n != 0 {
		t.Fatalf("%d partitions owned before the window's max", n)
	}
	w.advance(time.Millisecond) // 300 ms
	if n := len(w.owners("g")); n != 16 {
		t.Fatalf("%d of 16 partitions owned at initial_assign_delay_max", n)
	}
}

// TestLoneMemberWaitsTheDelay: what the window costs a consumer alone: its
// first grant comes initial_assign_delay after its join, on its held
// heartbeat, not before.
func TestLoneMemberWaitsTheDelay(t *testing.T) {
	w := newWorld(t, windowOn)
	w.topics(map[string]int32{"t": 3})
	id := joinHeld(t, w, "alone")
	if msgs := w.advance(49 * time.Millisecond); len(grantsFor(msgs, id)) != 0 {
		t.Fatal("granted before initial_assign_delay")
	}
	msgs := w.advance(time.Millisecond)
	if got := grantsFor(msgs, id); len(got) != 3 {
		t.Fatalf("%d grants at initial_assign_delay, want 3", len(got))
	}
}

// TestJoinIntoAGroupWithMembersIsNotHeld: the window is for empty groups
// only. A member joining a group whose members own partitions starts its
// handoffs in the same step (DESIGN §12's 4th member joining 3).
func TestJoinIntoAGroupWithMembersIsNotHeld(t *testing.T) {
	w := newWorld(t, windowOn)
	w.topics(map[string]int32{"t": 12})
	for i := range 3 {
		joinHeld(t, w, fmt.Sprintf("m%d", i))
	}
	w.advance(50 * time.Millisecond)
	if n := len(w.owners("g")); n != 12 {
		t.Fatalf("%d of 12 owned after the window", n)
	}
	w.step(group.Join{Ref: w.nextRef(), Group: "g", InstanceID: "fourth", ClientID: "c", Topics: []string{"t"}})
	if !w.revoking("g") {
		t.Fatal("the 4th member's join started no handoff in its own step")
	}
}

// TestJoinWindowOff: initial_assign_delay 0 assigns the first join at once,
// in its answer (the machine before the window).
func TestJoinWindowOff(t *testing.T) {
	w := newWorld(t) // the harness turns the window off
	w.topics(map[string]int32{"t": 3})
	id := w.join("g", "a", "t")
	if got := w.clients[id].grants; len(got) != 3 {
		t.Fatalf("join answer granted %d, want 3", len(got))
	}
}

// TestJoinWindowReopensWhenTheGroupEmpties: members that all leave inside
// the window leave nothing granted; a group emptied after its assignment
// holds its next first join again.
func TestJoinWindowReopensWhenTheGroupEmpties(t *testing.T) {
	w := newWorld(t, windowOn)
	w.topics(map[string]int32{"t": 2})
	a := joinHeld(t, w, "a")
	w.step(group.Leave{Ref: w.nextRef(), Group: "g", MemberID: a})
	w.advance(time.Second)
	if n := len(grantsPerPartition(w)); n != 0 {
		t.Fatalf("%d partitions granted to a member that left inside the window", n)
	}
	b := joinHeld(t, w, "b")
	w.advance(50 * time.Millisecond)
	if n := len(w.owners("g")); n != 2 {
		t.Fatalf("%d of 2 owned after the second window", n)
	}
	w.step(group.Leave{Ref: w.nextRef(), Group: "g", MemberID: b})
	w.settle("g")
	w.advance(time.Second)
	c := joinHeld(t, w, "c")
	if n := len(w.owners("g")); n != 0 {
		t.Fatalf("%d owned right after a join into the emptied group", n)
	}
	if msgs := w.advance(50 * time.Millisecond); len(grantsFor(msgs, c)) != 2 {
		t.Fatal("the emptied group's next member got nothing when its window closed")
	}
}

// TestRestoreInsideTheWindow: the window is not persisted. A restart (or
// a replica's takeover) while it is open restores the members that joined
// and assigns them at once: nothing is lost, nothing waits for a timer
// the old machine held, and every partition is granted once.
func TestRestoreInsideTheWindow(t *testing.T) {
	w := newWorld(t, windowOn)
	w.topics(map[string]int32{"t": 6})
	a := joinHeld(t, w, "a")
	w.advance(20 * time.Millisecond)
	b := joinHeld(t, w, "b")
	w.restart(10 * time.Millisecond) // held heartbeats are lost with the machine
	if n := len(w.owners("g")); n != 6 {
		t.Fatalf("%d of 6 owned right after the restore", n)
	}
	w.heartbeat(a)
	w.heartbeat(b)
	if na, nb := len(w.clients[a].grants), len(w.clients[b].grants); na != 3 || nb != 3 {
		t.Fatalf("after the restore: a holds %d, b %d grants, want 3 each", na, nb)
	}
	for k, n := range grantsPerPartition(w) {
		if n != 1 {
			t.Fatalf("%v granted %d times", k, n)
		}
	}
	w.advance(time.Second) // the old window's end passes: nothing moves
	if w.revoking("g") {
		t.Fatal("a handoff started after the restore")
	}
}

// TestOutsideLeaseServedInsideTheWindow: the window holds back members'
// grants only; an outside lease on the empty group's partition is granted
// as always.
func TestOutsideLeaseServedInsideTheWindow(t *testing.T) {
	w := newWorld(t, windowOn)
	w.topics(map[string]int32{"t": 2})
	joinHeld(t, w, "a")
	ref := w.nextRef()
	w.step(group.Lease{Ref: ref, Group: "g", Topic: "t", Partition: 1, Holder: "etl", TTL: time.Minute})
	mustReply[group.LeaseReply](t, w, ref)
	if owners := w.owners("g"); len(owners) != 1 {
		t.Fatalf("owned inside the window: %v, want only the lease", owners)
	}
}
