package group_test

import (
	"testing"

	"github.com/capgate/capgate/coordinator/group"
)

// New partitions are granted at once; nobody else moves.
func TestPartitionCountIncrease(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 4})
	w.pollUntilParked("gw1")
	a := w.join("g", "a", "t")
	b := w.join("g", "b", "t")
	w.settle("g")
	w.heartbeat(a)
	w.heartbeat(b)
	before, from := w.epochs("g"), len(w.sent)
	w.topics(map[string]int32{"t": 6})
	for _, id := range []string{a, b} {
		if r := revokesFor(w.sent[from:], id); len(r) != 0 {
			t.Fatalf("%s got revokes %v", id, r)
		}
		if g := grantsFor(w.sent[from:], id); len(g) != 1 || g[0].Partition < 4 || g[0].Epoch != 1 {
			t.Fatalf("%s got %+v, want one new partition at epoch 1", id, g)
		}
	}
	for p, e := range before {
		if w.epochs("g")[p] != e {
			t.Fatalf("%v epoch changed", p)
		}
	}
	if f := fencesIn(w.sent[from:]); len(f) != 0 {
		t.Fatalf("fences %v", f)
	}
	// A smaller count is ignored (Kafka never shrinks a topic).
	w.topics(map[string]int32{"t": 2})
	if len(w.owners("g")) != 6 {
		t.Fatalf("owners after a shrinking update: %v", w.owners("g"))
	}
}

// A pattern subscription picks up new matching topics and only those.
func TestPatternSubscription(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"orders-eu": 2, "payments": 2})
	ref := w.nextRef()
	w.step(group.Join{Ref: ref, Group: "g", InstanceID: "a", TopicPattern: "orders-.*"})
	a := mustReply[group.JoinReply](t, w, ref).MemberID
	if n := len(w.replies[ref].(group.JoinReply).Grants); n != 2 {
		t.Fatalf("join grants %d, want orders-eu's 2", n)
	}
	w.heartbeat(a)
	w.topics(map[string]int32{"orders-us": 3, "xorders-us": 1, "orders": 1})
	if g := grantsFor(w.sent, a); len(g) != 5 {
		t.Fatalf("grants %+v, want orders-eu and orders-us (the pattern matches whole names)", g)
	}
	for _, p := range w.describe("g").Partitions {
		if p.Topic != "orders-eu" && p.Topic != "orders-us" {
			t.Fatalf("unexpected partition %+v", p)
		}
	}
}

// A deleted topic's partitions are fenced and dropped; their epochs stay,
// so a recreated topic continues above them.
func TestTopicDeletion(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 2})
	w.pollUntilParked("gw1")
	a := w.join("g", "a", "t")
	w.heartbeat(a)
	w.step(group.Topics{Deleted: []string{"t"}})
	if r := revokesFor(w.sent, a); len(r) != 2 {
		t.Fatalf("revokes %v", r)
	}
	w.settle("g")
	if len(w.owners("g")) != 0 {
		t.Fatalf("owners of a deleted topic: %v", w.owners("g"))
	}
	w.topics(map[string]int32{"t": 2})
	for _, p := range w.describe("g").Partitions {
		if p.State != group.Owned || p.Epoch != 3 {
			t.Fatalf("recreated topic: %+v, want owned at epoch 3", p)
		}
	}
}
