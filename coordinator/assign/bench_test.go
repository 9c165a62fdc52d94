package assign_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/capgate/capgate/coordinator/assign"
)

// naiveSticky is the obvious O(P·M)-per-step version of Sticky's rules,
// the baseline for the benchmarks: keep, place each unowned partition by
// scanning every member, then repeatedly scan every (partition, member)
// pair for the widest improving move.
func naiveSticky(in assign.Input) assign.Assignment {
	g := digest(in)
	out := assign.Assignment{}
	load := map[string]int{}
	pinned := map[assign.Partition]bool{}
	var unowned []assign.Partition
	for _, p := range g.partitions {
		id, ok := g.pin(p)
		pinned[p] = ok
		if !ok {
			id, ok = g.original(p)
		}
		if !ok {
			unowned = append(unowned, p)
			continue
		}
		out[p] = id
		load[id]++
	}
	for _, p := range unowned {
		best := ""
		for _, id := range g.eligibleFor(p) {
			if best == "" || load[id] < load[best] {
				best = id
			}
		}
		out[p] = best
		load[best]++
	}
	for naiveMove(g, out, load, pinned) {
	}
	return out
}

func naiveMove(g *naiveGroup, out assign.Assignment, load map[string]int, pinned map[assign.Partition]bool) bool {
	var move assign.Partition
	to, gap := "", 1
	for _, p := range slices.Backward(g.partitions) {
		if pinned[p] {
			continue
		}
		for _, id := range g.eligibleFor(p) {
			if d := load[out[p]] - load[id]; d > gap {
				move, to, gap = p, id, d
			}
		}
	}
	if to == "" {
		return false
	}
	load[out[move]]--
	out[move] = to
	load[to]++
	return true
}

// TestNaiveStickyBalanced keeps the baseline honest: it must satisfy the
// same coverage and balance rules.
func TestNaiveStickyBalanced(t *testing.T) {
	for i := range uint64(300) {
		in := randomInput(rand.New(rand.NewPCG(*propertySeed, i)))
		g := digest(in)
		out := naiveSticky(in)
		if err := g.checkCoverage(out); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if v := g.balanceViolation(out); v != "" {
			t.Fatalf("case %d: %s", i, v)
		}
	}
}

// benchInput builds a group of n members and 10 topics of n partitions
// each (1000 members and 10,000 partitions for n = 1000).
//   - fresh: everyone subscribes to all 10 topics, nothing owned yet.
//   - join: the last member joins a balanced group of n−1.
//   - leave: the first member leaves a balanced group of n.
//   - mixed: each member subscribes to 5 of the 10 topics; the last 10%
//     join a balanced group of the others.
func benchInput(kind string, n int) assign.Input {
	rng := rand.New(rand.NewPCG(42, 0))
	var all []string
	for t := range 10 {
		all = append(all, fmt.Sprintf("topic-%d", t))
	}
	in := assign.Input{Members: members(topics(all...), memberIDs(n)...)}
	for _, topic := range all {
		in.Partitions = append(in.Partitions, parts(topic, 0, n)...)
	}
	previous := in
	switch kind {
	case "join":
		previous.Members = in.Members[:n-1]
	case "leave":
		in.Members = in.Members[1:]
	case "mixed":
		for i := range in.Members {
			in.Members[i].Topics = topics(sample(rng, all, 5)...)
		}
		previous.Members = in.Members[:n*9/10]
	}
	if kind != "fresh" {
		in.Current = assign.Sticky(previous)
	}
	return in
}

func memberIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("member-%04d", i)
	}
	return ids
}

func sample(rng *rand.Rand, from []string, n int) []string {
	out := slices.Clone(from)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out[:n]
}

func benchmarkSticky(b *testing.B, f assign.Func, n int, kinds ...string) {
	for _, kind := range kinds {
		in := benchInput(kind, n)
		b.Run(kind, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f(in)
			}
		})
	}
}

func BenchmarkSticky1000x10000(b *testing.B) {
	benchmarkSticky(b, assign.Sticky, 1000, "fresh", "join", "leave", "mixed")
}

// Sticky against the naive baseline at a size the baseline can run.
func BenchmarkSticky100x1000(b *testing.B) {
	benchmarkSticky(b, assign.Sticky, 100, "fresh", "join", "mixed")
}

func BenchmarkStickyNaive100x1000(b *testing.B) {
	benchmarkSticky(b, naiveSticky, 100, "fresh", "join", "mixed")
}

func BenchmarkRange1000x10000(b *testing.B) {
	in := benchInput("fresh", 1000)
	b.ReportAllocs()
	for b.Loop() {
		assign.Range(in)
	}
}
