package group_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/group"
)

// creatorLimits: a credential may create 2 groups; the coordinator holds
// up to 10; groups with offsets are reaped after twice the shortest TTL.
func creatorLimits(c *group.Config) {
	c.Limits.GroupsPerCredential = 2
	c.Limits.Groups = 10
	reapSoon(c)
	c.Limits.OffsetsRetention = 2 * c.Limits.EmptyGroupTTL
}

// commitAndLeave is the attack's step: cred joins name (creating it),
// commits one offset and leaves, so it has no member left there.
func (w *world) commitAndLeave(cred group.Credential, name string) {
	w.t.Helper()
	r, ok := w.joinAs(cred, group.Join{Group: name}).(group.JoinReply)
	if !ok {
		w.t.Fatalf("join %s: %#v", name, w.replies[w.ref])
	}
	w.settle(name)
	if msg := w.commit(r.MemberID, "t", 0, w.partition(name, "t", 0).Epoch, 1, false); msg == nil {
		w.t.Fatalf("commit in %s: no reply", name)
	} else if _, ok := msg.(group.CommitReply); !ok {
		w.t.Fatalf("commit in %s: %#v", name, msg)
	}
	w.step(group.Leave{Ref: w.nextRef(), Group: name, MemberID: r.MemberID})
}

func mustCreatedLimit(t *testing.T, msg group.Message, n int) {
	t.Helper()
	mustLimit(t, msg, "groups_per_credential")
	if r := msg.(group.Rejected); !strings.Contains(r.Message, "created") || r.Details["max"] != int64(n) {
		t.Fatalf("want the created-groups refusal at %d, got %#v", n, r)
	}
}

func attacked(t *testing.T) *world {
	w := newWorld(t, creatorLimits)
	w.topics(map[string]int32{"t": 1})
	w.pollUntilParked("gw1")
	w.commitAndLeave(credA, "a-0")
	w.commitAndLeave(credA, "a-1")
	w.advanceTo(w.now.Add(time.Minute)) // the partitions go to nobody
	return w
}

// The audit's attack: a credential that joins a new group, commits one
// offset and leaves, again and again, has no live member anywhere, but
// the groups it created still count: past groups_per_credential it
// cannot create more, while another credential still creates groups and
// A still joins groups that exist.
func TestCreatedGroupsAreBoundedPerCredential(t *testing.T) {
	w := attacked(t)
	if n := w.m.GroupsCreated(credA.ID); n != 2 {
		t.Fatalf("credential A created %d groups, want 2", n)
	}
	mustCreatedLimit(t, w.joinAs(credA, group.Join{Group: "a-2"}), 2)
	if _, ok := w.joinAs(credB, group.Join{Group: "b-0"}).(group.JoinReply); !ok {
		t.Fatalf("another credential refused a new group: %#v", w.replies[w.ref])
	}
	if _, ok := w.joinAs(credA, group.Join{Group: "b-0"}).(group.JoinReply); !ok {
		t.Fatalf("A refused a group it does not create: %#v", w.replies[w.ref])
	}
	if n := w.m.GroupsCreated(credB.ID); n != 1 {
		t.Fatalf("credential B created %d groups, want 1", n)
	}
}

// A restart keeps who created each group (GroupRecord.Creator), so the
// count survives it; records written before creators were kept count for
// nobody.
func TestCreatedGroupsSurviveRestart(t *testing.T) {
	w := attacked(t)
	w.restart(time.Second)
	w.pollUntilParked("gw1")
	if n := w.m.GroupsCreated(credA.ID); n != 2 {
		t.Fatalf("after a restart credential A created %d groups, want 2", n)
	}
	mustCreatedLimit(t, w.joinAs(credA, group.Join{Group: "a-2"}), 2)

	snap := w.store.snapshot()
	for i := range snap.Groups {
		snap.Groups[i].Creator = "" // as written before this change
	}
	m, err := group.Restore(w.cfg, rand.New(rand.NewPCG(5, 6)), snap, w.now)
	if err != nil {
		t.Fatal(err)
	}
	if n := m.GroupsCreated(credA.ID); n != 0 {
		t.Fatalf("groups without a creator count %d for A", n)
	}
}

// Groups holding committed offsets are kept past empty_group_ttl but
// forgotten, offsets and all, once empty for offsets_retention: their
// creator gets its places back.
func TestOffsetsRetentionReapsAndFreesPlaces(t *testing.T) {
	w := attacked(t)
	w.advanceTo(w.now.Add(w.cfg.Limits.EmptyGroupTTL + w.cfg.Limits.EmptyGroupTTL/2))
	for _, name := range []string{"a-0", "a-1"} {
		if _, ok := w.m.DescribeGroup(name); !ok {
			t.Fatalf("group %s with offsets reaped after empty_group_ttl, before offsets_retention", name)
		}
	}
	mustCreatedLimit(t, w.joinAs(credA, group.Join{Group: "a-2"}), 2)
	w.advanceTo(w.now.Add(2 * w.cfg.Limits.OffsetsRetention))
	for _, name := range []string{"a-0", "a-1"} {
		if _, ok := w.m.DescribeGroup(name); ok {
			t.Fatalf("group %s still held %s after it emptied", name, 2*w.cfg.Limits.OffsetsRetention)
		}
	}
	snap := w.store.snapshot()
	if len(snap.Offsets) != 0 || len(snap.Groups) != 0 {
		t.Fatalf("the store still holds offsets %+v, groups %+v", snap.Offsets, snap.Groups)
	}
	if n := w.m.GroupsCreated(credA.ID); n != 0 {
		t.Fatalf("credential A still holds %d places", n)
	}
	if _, ok := w.joinAs(credA, group.Join{Group: "a-2"}).(group.JoinReply); !ok {
		t.Fatalf("A refused after its groups were reaped: %#v", w.replies[w.ref])
	}
}

// With offsets_retention 0 a group's offsets are kept for ever.
func TestOffsetsRetentionZeroKeeps(t *testing.T) {
	w := newWorld(t, creatorLimits, func(c *group.Config) { c.Limits.OffsetsRetention = 0 })
	w.topics(map[string]int32{"t": 1})
	w.pollUntilParked("gw1")
	w.commitAndLeave(credA, "a-0")
	w.advanceTo(w.now.Add(100 * w.cfg.Limits.EmptyGroupTTL))
	if d, ok := w.m.DescribeGroup("a-0"); !ok || d.Partitions[0].Committed != 1 {
		t.Fatalf("group with offsets forgotten under offsets_retention 0: %+v %v", d, ok)
	}
}

// An admin delete gives the creator its place back at once; whoever
// joins the deleted group's name next creates it.
func TestDeleteFreesCreatorsPlace(t *testing.T) {
	w := attacked(t)
	w.step(group.DeleteGroup{Ref: w.nextRef(), Group: "a-0"})
	if _, ok := w.replies[w.ref].(group.DeleteGroupReply); !ok {
		t.Fatalf("delete: %#v", w.replies[w.ref])
	}
	if n := w.m.GroupsCreated(credA.ID); n != 1 {
		t.Fatalf("credential A holds %d places after a delete, want 1", n)
	}
	if _, ok := w.joinAs(credB, group.Join{Group: "a-0"}).(group.JoinReply); !ok {
		t.Fatalf("join of the deleted group: %#v", w.replies[w.ref])
	}
	if a, b := w.m.GroupsCreated(credA.ID), w.m.GroupsCreated(credB.ID); a != 1 || b != 1 {
		t.Fatalf("after B recreated a-0: A %d, B %d places; want 1, 1", a, b)
	}
	if _, ok := w.joinAs(credA, group.Join{Group: "a-2"}).(group.JoinReply); !ok {
		t.Fatalf("A refused after a delete freed a place: %#v", w.replies[w.ref])
	}
	mustCreatedLimit(t, w.joinAs(credA, group.Join{Group: "a-3"}), 2)
}

// An admin's offset reset restarts the retention of an idle group, as a
// commit does in Kafka: the group is kept a full offsets_retention from
// the reset.
func TestOffsetResetRestartsRetention(t *testing.T) {
	w := attacked(t)
	w.advanceTo(w.now.Add(w.cfg.Limits.OffsetsRetention - w.cfg.Limits.OffsetsRetention/8))
	w.step(group.ResetOffset{Ref: w.nextRef(), Group: "a-0", Topic: "t", Partition: 0, Offset: 0})
	if _, ok := w.replies[w.ref].(group.ResetOffsetReply); !ok {
		t.Fatalf("reset: %#v", w.replies[w.ref])
	}
	w.advanceTo(w.now.Add(w.cfg.Limits.OffsetsRetention / 2))
	if _, ok := w.m.DescribeGroup("a-1"); ok {
		t.Fatal("a-1 kept past offsets_retention")
	}
	if _, ok := w.m.DescribeGroup("a-0"); !ok {
		t.Fatal("a-0 reaped though its offset was reset within offsets_retention")
	}
}
