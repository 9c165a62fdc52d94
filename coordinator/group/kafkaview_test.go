package group_test

import (
	"testing"
	"time"

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
	v, _ := w.m.KafkaView("g", 10, 100, 1<<20)
	if len(v.Members) != 2 || len(v.Members[0].Owned)+len(v.Members[1].Owned) != 12 || v.Truncated {
		t.Fatalf("view %+v, want 2 members owning 12", v)
	}
	if v, _ := w.m.KafkaView("g", 1, 3, 1<<20); len(v.Members) != 1 || len(v.Members[0].Owned) != 3 || !v.Truncated {
		t.Fatalf("bounded view %+v, want 1 member, 3 partitions, truncated", v)
	}
	if v, _ := w.m.KafkaView("g", 10, 100, 1); len(v.Members) != 1 || !v.Truncated {
		t.Fatalf("view within 1 byte %+v, want its first member only, truncated", v)
	}
	for _, id := range []string{a, b} {
		w.step(group.Leave{Ref: w.nextRef(), Group: "g", MemberID: id})
	}
	if s := state(); s != group.KafkaEmpty {
		t.Fatalf("both left: %s, want Empty", s)
	}
}

// TestKafkaStateCountsMovesHeldBack: with max_moves_per_second a join's
// moves start one at a time; between one handoff's end and the next
// move's start nothing is being revoked, yet the newcomer still waits for
// partitions. That was Stable, and `capgate consume --idle-exit` read a
// member waiting on such a move as idle with no partition (firstday7's
// left). It is PreparingRebalance until the last held-back move started,
// Stable once every member holds its share.
func TestKafkaStateCountsMovesHeldBack(t *testing.T) {
	w, _ := threeMembers(t)
	one := 1
	ref := w.nextRef()
	w.step(group.SetGroupConfig{Ref: ref, Group: "g", MaxMovesPerSecond: &one})
	mustReply[group.GroupConfigReply](t, w, ref)
	d := w.join("g", "d", "t")
	w.settle("g") // the first move is done; the other two are held back
	if w.revoking("g") {
		t.Fatal("a partition is still being revoked: no held-back move to observe")
	}
	if s, _ := w.m.KafkaState("g"); s != group.KafkaPreparingRebalance {
		t.Fatalf("the first move done, two held back: %s, want PreparingRebalance", s)
	}
	for range 40 {
		w.advance(100 * time.Millisecond)
		w.settle("g")
	}
	if s, _ := w.m.KafkaState("g"); s != group.KafkaStable {
		t.Fatalf("every move done: %s, want Stable", s)
	}
	if n := len(w.clients[d].held); n != 3 {
		t.Fatalf("the newcomer holds %d, want 3", n)
	}
}
