package sim

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestEventQueueOrder: events come out by time, ties in scheduling order,
// whatever order they went in, also with pushes and pops interleaved (as
// the world runs them).
func TestEventQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := newEventHeap()
	var want []event // what the queue holds, sorted at each pop
	byTimeThenSeq := func(a, b event) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq)) }
	pop := func(i int) {
		slices.SortFunc(want, byTimeThenSeq)
		got := h.Pop()
		if w := want[0]; got.at != w.at || got.seq != w.seq {
			t.Fatalf("pop %d: got (%s, %d), want (%s, %d)", i, got.at, got.seq, w.at, w.seq)
		}
		want = want[1:]
	}
	for seq := range uint64(5000) {
		e := event{at: time.Duration(rng.IntN(50)), seq: seq}
		h.Push(e)
		want = append(want, e)
		if seq >= 1000 && rng.IntN(3) > 0 {
			pop(int(seq))
		}
	}
	for i := 0; h.Len() > 0; i++ {
		pop(i)
	}
	if len(want) != 0 {
		t.Fatalf("%d events never came out", len(want))
	}
}
