package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestEventQueueOrder: events come out by time, ties in scheduling order,
// whatever order they went in.
func TestEventQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := newEventHeap()
	var want []event
	for seq := range uint64(1000) {
		e := event{at: time.Duration(rng.IntN(50)), seq: seq}
		h.Push(e)
		want = append(want, e)
	}
	slices.SortStableFunc(want, func(a, b event) int { return int(a.at - b.at) })
	for i, w := range want {
		got := h.Pop()
		if got.at != w.at || got.seq != w.seq {
			t.Fatalf("pop %d: got (%s, %d), want (%s, %d)", i, got.at, got.seq, w.at, w.seq)
		}
	}
}
