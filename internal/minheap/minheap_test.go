package minheap_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/capgate/capgate/internal/minheap"
)

// TestOrder: elements come out smallest first, whatever order they went
// in, against a sort of the same elements.
func TestOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 100 {
		h := minheap.New(func(a, b int) bool { return a < b })
		var want []int
		for range rng.IntN(200) {
			x := rng.IntN(50)
			h.Push(x)
			want = append(want, x)
			if rng.IntN(4) == 0 {
				slices.Sort(want)
				if got := h.Pop(); got != want[0] {
					t.Fatalf("round %d: popped %d, want %d", round, got, want[0])
				}
				want = want[1:]
			}
		}
		slices.Sort(want)
		for _, w := range want {
			if h.Min() != w {
				t.Fatalf("round %d: min %d, want %d", round, h.Min(), w)
			}
			if got := h.Pop(); got != w {
				t.Fatalf("round %d: popped %d, want %d", round, got, w)
			}
		}
		if h.Len() != 0 {
			t.Fatalf("round %d: %d left", round, h.Len())
		}
	}
}
