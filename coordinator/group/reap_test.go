package group_test

import (
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/group"
)

func reapSoon(c *group.Config) {
	c.Limits.EmptyGroupTTL = c.MaxLease + c.Leeway + c.MaxClockSkew
}

// A group nobody uses any more is forgotten after empty_group_ttl, and
// the epochs it granted are never granted again: the store keeps their
// highest as the epoch floor, where every new partition starts, also
// after a restart.
func TestEmptyGroupsAreReaped(t *testing.T) {
	w := newWorld(t, reapSoon)
	w.topics(map[string]int32{"t": 2})
	w.pollUntilParked("gw1")
	id := w.join("g", "a", "t")
	w.settle("g")
	kept := w.join("offsets", "b", "t") // a group with a committed offset stays
	w.settle("offsets")
	if _, ok := w.commit(kept, "t", 0, w.partition("offsets", "t", 0).Epoch, 0, false).(group.CommitReply); !ok {
		t.Fatal("commit refused")
	}
	state := w.m.StateBytes()
	ref := w.nextRef()
	w.step(group.Leave{Ref: ref, Group: "g", MemberID: id})
	ref = w.nextRef()
	w.step(group.Leave{Ref: ref, Group: "offsets", MemberID: kept})
	w.advanceTo(w.now.Add(time.Minute)) // the partitions go to nobody under a last fence
	before := w.epochs("g")
	w.advanceTo(w.now.Add(w.cfg.Limits.EmptyGroupTTL * 2))
	if _, ok := w.m.DescribeGroup("g"); ok {
		t.Fatalf("group g still held %s after it emptied", w.cfg.Limits.EmptyGroupTTL*2)
	}
	if _, ok := w.m.DescribeGroup("offsets"); !ok {
		t.Fatal("a group with committed offsets was reaped")
	}
	if w.m.StateBytes() >= state {
		t.Fatalf("state estimate %d, was %d before the group went", w.m.StateBytes(), state)
	}
	var highest uint64
	for _, e := range before {
		highest = max(highest, e)
	}
	if snap := w.store.snapshot(); snap.EpochFloor != highest {
		t.Fatalf("stored epoch floor %d, want the reaped group's highest epoch %d", snap.EpochFloor, highest)
	}
	w.restart(time.Second)
	w.pollUntilParked("gw1")
	w.join("g", "a", "t")
	w.settle("g")
	for p, e := range w.epochs("g") {
		if e <= highest {
			t.Fatalf("%v granted at epoch %d again, at or below the forgotten %d", p, e, highest)
		}
	}
	w.join("h", "c", "t")
	w.settle("h")
	for p, e := range w.epochs("h") {
		if e <= highest {
			t.Fatalf("new group's %v at epoch %d, at or below the floor %d", p, e, highest)
		}
	}
}

// A group with an admin's settings, or with a member, is never reaped.
func TestGroupsInUseAreKept(t *testing.T) {
	w := newWorld(t, reapSoon)
	w.topics(map[string]int32{"t": 1})
	moves := 2
	ref := w.nextRef()
	w.step(group.SetGroupConfig{Ref: ref, Group: "configured", MaxMovesPerSecond: &moves})
	w.join("live", "a", "t")
	id := w.clientsIn("live")
	w.keepAliveUntil(w.now.Add(w.cfg.Limits.EmptyGroupTTL*2), id...)
	for _, name := range []string{"configured", "live"} {
		if _, ok := w.m.DescribeGroup(name); !ok {
			t.Fatalf("group %s reaped", name)
		}
	}
}

// clientsIn lists the member ids of a group's clients.
func (w *world) clientsIn(groupName string) []string {
	var ids []string
	for id, c := range w.clients {
		if c.group == groupName {
			ids = append(ids, id)
		}
	}
	return ids
}
