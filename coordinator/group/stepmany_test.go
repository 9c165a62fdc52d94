package group_test

import (
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/coordinator/group"
)

// TestStepManyJoinStorm: members joining in bursts (one StepMany per
// burst, as the shell batches a queue) each get exactly one reply, the
// invariants hold after every burst, and the group settles balanced with
// every partition owned once — the same end state as one-by-one joins.
func TestStepManyJoinStorm(t *testing.T) {
	defer group.SetAssignorLookup(assign.Lookup)()
	w := newWorld(t)
	w.topics(map[string]int32{"t": 60})
	w.poll("gw1")
	first := w.join("g", "seed", "t")
	var refs []group.Ref
	for burst := 0; burst < 4; burst++ {
		evs := []group.Event{}
		for i := 0; i < 5; i++ {
			ref := w.nextRef()
			refs = append(refs, ref)
			evs = append(evs, group.Join{Ref: ref, Group: "g", InstanceID: string(rune('a' + burst*5 + i)), ClientID: "c", Topics: []string{"t"}})
		}
		// A heartbeat of an existing member rides in the same burst.
		c := w.clients[first]
		if c.parked == 0 {
			c.parked = w.nextRef()
			evs = append(evs, group.Heartbeat{Ref: c.parked, Group: "g", MemberID: first, Wait: time.Second})
		}
		w.m.StepMany(w.now, evs)
		w.drain()
		w.advance(time.Second) // ends the held heartbeat
		for _, id := range sortedMapKeys(w.gateways) {
			w.pollUntilParked(id)
		}
	}
	for _, ref := range refs {
		r, ok := w.replies[ref].(group.JoinReply)
		if !ok {
			t.Fatalf("ref %d: %#v", ref, w.replies[ref])
		}
		w.clients[r.MemberID].instance = r.MemberID
	}
	w.settle("g")
	owners := w.owners("g")
	if len(owners) != 60 {
		t.Fatalf("%d partitions owned, want 60", len(owners))
	}
	load := map[string]int{}
	for _, m := range owners {
		load[m]++
	}
	if len(load) != 21 {
		t.Fatalf("%d members own partitions, want 21", len(load))
	}
	for m, n := range load {
		if n < 2 || n > 3 {
			t.Fatalf("member %s owns %d, want floor/ceil of 60/21", m, n)
		}
	}
}
