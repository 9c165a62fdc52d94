package group_test

import (
	"testing"

	"github.com/capgate/capgate/coordinator/group"
)

// TestKafkaStateFollowsTheHandoff: Kafka's state of a group through a
// join and a handoff — Stable once its one member owns everything,
// PreparingRebalance while partitions are revoked from it for a
// newcomer, Stable again once settled (each owning its share, as
// KafkaView shows), Empty when both left; an unknown group is not found.
func TestKafkaStateFollowsTheHandoff(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 12})
	w.pollUntilParked("gw1")
	if _, ok := w.m.KafkaState("g"); ok {
		t.Fatal("an unknown group has a state")
	}
	a := w.join("g", "a", "t")
	w.settle("g")
	state := func() string {
		s, ok := w.m.KafkaState("g")
		if !ok {
			t.Fatal("group g not found")
		}
		return s
	}
	if s := state(); s != group.KafkaStable {
		t.Fatalf("one member owning all: %s, want Stable", s)
	}
	b := w.join("g", "b", "t")
	if !w.revoking("g") {
		t.Fatal("the join revoked nothing: no handoff to observe")
	}
	if s := state(); s != group.KafkaPreparingRebalance {
		t.Fatalf("during the handoff: %s, want PreparingRebalance", s)
	}
	w.settle("g")
	if s := state(); s != group.KafkaStable {
		t.Fatalf("settled: %s, want Stable", s)
	}
	v, _ := w.m.KafkaView("g", 10, 100)
	if len(v.Members) != 2 || len(v.Members[0].Owned)+len(v.Members[1].Owned) != 12 || v.Truncated {
		t.Fatalf("view %+v, want 2 members owning 12", v)
	}
	if v, _ := w.m.KafkaView("g", 1, 3); len(v.Members) != 1 || len(v.Members[0].Owned) != 3 || !v.Truncated {
		t.Fatalf("bounded view %+v, want 1 member, 3 partitions, truncated", v)
	}
	for _, id := range []string{a, b} {
		w.step(group.Leave{Ref: w.nextRef(), Group: "g", MemberID: id})
	}
	if s := state(); s != group.KafkaEmpty {
		t.Fatalf("both left: %s, want Empty", s)
	}
}
