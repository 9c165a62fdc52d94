package group_test

import (
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

// Deleting a group with a live member is refused (409) unless forced;
// forced, the member is revoked, the offsets and settings go, the group
// neither lists nor describes, admin actions on it get 404; the reaper
// forgets it later, and a join under the same name starts a new group
// whose epochs continue above the old ones.
func TestDeleteGroup(t *testing.T) {
	w, a := oneMember(t, reapSoon)
	e0 := w.partition("g", "t", 0).Epoch
	if _, ok := w.commit(a, "t", 0, e0, 5, false).(group.CommitReply); !ok {
		t.Fatal("commit refused")
	}
	moves := 3
	ref := w.nextRef()
	w.step(group.SetGroupConfig{Ref: ref, Group: "g", MaxMovesPerSecond: &moves})
	mustReply[group.GroupConfigReply](t, w, ref)

	ref = w.nextRef()
	w.step(group.DeleteGroup{Ref: ref, Group: "g"})
	mustReject(t, w, ref, api.CodeConflict)
	if !w.isMember("g", a) || len(w.m.Offsets("g")) != 1 {
		t.Fatal("a refused delete changed the group")
	}

	ref = w.nextRef()
	w.step(group.DeleteGroup{Ref: ref, Group: "g", Force: true})
	if r := mustReply[group.DeleteGroupReply](t, w, ref); r.Members != 1 || r.Offsets != 1 {
		t.Fatalf("delete reply %+v", r)
	}
	if w.isMember("g", a) || len(w.m.Offsets("g")) != 0 || len(w.m.Groups()) != 0 {
		t.Fatalf("after delete: member %v, offsets %v, groups %v", w.isMember("g", a), w.m.Offsets("g"), w.m.Groups())
	}
	if _, ok := w.m.DescribeGroup("g"); ok {
		t.Fatal("a deleted group still describes")
	}
	ref = w.nextRef()
	w.step(group.DeleteGroup{Ref: ref, Group: "g", Force: true})
	mustReject(t, w, ref, api.CodeNotFound)
	ref = w.nextRef()
	w.step(group.RevokePartition{Ref: ref, Group: "g", Topic: "t", Partition: 0})
	mustReject(t, w, ref, api.CodeNotFound)
	w.pollUntilParked("gw1")
	w.advanceTo(w.now.Add(w.cfg.Limits.EmptyGroupTTL * 2))
	if snap := w.store.snapshot(); snap.EpochFloor <= e0 {
		t.Fatalf("epoch floor %d after the deleted group was reaped, want above %d", snap.EpochFloor, e0)
	}
	b := w.join("g", "b", "t")
	w.settle("g")
	if d, ok := w.m.DescribeGroup("g"); !ok || d.Config.MaxMovesPerSecond != 0 || len(w.m.Offsets("g")) != 0 {
		t.Fatalf("the group joined again: %+v %v", d, ok)
	}
	if p := w.partition("g", "t", 0); p.Owner != b || p.Epoch <= e0+1 {
		t.Fatalf("new group's partition %+v: want %s above epoch %d", p, b, e0+1)
	}
}
