package assign_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"github.com/capgate/capgate/coordinator/assign"
)

// This file holds the naive checker: it restates what Sticky promises in
// the most direct way (loops over every partition and member), without
// sharing any code with the package.

// naiveGroup is an Input digested the slow, obvious way.
type naiveGroup struct {
	in         assign.Input
	members    []string                   // sorted, unique
	topics     map[string]map[string]bool // member -> topic set (duplicates merged)
	partitions []assign.Partition         // sorted, unique, assignable only
	all        []assign.Partition         // sorted, unique
	byTopic    map[string][]string        // memo of eligibleFor
}

func digest(in assign.Input) *naiveGroup {
	g := &naiveGroup{in: in, topics: map[string]map[string]bool{}, byTopic: map[string][]string{}}
	for _, m := range in.Members {
		if g.topics[m.ID] == nil {
			g.topics[m.ID] = map[string]bool{}
			g.members = append(g.members, m.ID)
		}
		for topic, on := range m.Topics {
			if on {
				g.topics[m.ID][topic] = true
			}
		}
	}
	sort.Strings(g.members)
	seen := map[assign.Partition]bool{}
	for _, p := range in.Partitions {
		if !seen[p] {
			seen[p] = true
			g.all = append(g.all, p)
		}
	}
	sort.Slice(g.all, func(i, j int) bool { return g.all[i].Less(g.all[j]) })
	for _, p := range g.all {
		if len(g.eligibleFor(p)) > 0 {
			g.partitions = append(g.partitions, p)
		}
	}
	return g
}

func (g *naiveGroup) eligible(id string, p assign.Partition) bool {
	return g.topics[id] != nil && g.topics[id][p.Topic]
}

// eligibleFor lists the members p may go to, sorted.
func (g *naiveGroup) eligibleFor(p assign.Partition) []string {
	if out, ok := g.byTopic[p.Topic]; ok {
		return out
	}
	out := []string{}
	for _, id := range g.members {
		if g.eligible(id, p) {
			out = append(out, id)
		}
	}
	g.byTopic[p.Topic] = out
	return out
}

// pin returns the member p must go to, if any.
func (g *naiveGroup) pin(p assign.Partition) (string, bool) {
	id, ok := g.in.Pins[p]
	if !ok || !g.eligible(id, p) {
		return "", false
	}
	return id, true
}

// original returns p's current owner if it is still eligible.
func (g *naiveGroup) original(p assign.Partition) (string, bool) {
	id, ok := g.in.Current[p]
	if !ok || !g.eligible(id, p) {
		return "", false
	}
	return id, true
}

func (g *naiveGroup) homogeneous() bool {
	for _, p := range g.partitions {
		if len(g.eligibleFor(p)) != len(g.members) {
			return false
		}
	}
	return true
}

func (g *naiveGroup) hasValidPins() bool {
	for _, p := range g.partitions {
		if _, ok := g.pin(p); ok {
			return true
		}
	}
	return false
}

func loads(out assign.Assignment) map[string]int {
	load := map[string]int{}
	for _, id := range out {
		load[id]++
	}
	return load
}

// balanceViolation returns a partition that could move to an eligible
// member whose load is at least two lower, or "" if there is none.
func (g *naiveGroup) balanceViolation(out assign.Assignment) string {
	load := loads(out)
	for _, p := range g.partitions {
		if _, pinned := g.pin(p); pinned {
			continue
		}
		from := out[p]
		for _, to := range g.eligibleFor(p) {
			if load[from] > load[to]+1 {
				return fmt.Sprintf("%v on %s (load %d) could move to %s (load %d)", p, from, load[from], to, load[to])
			}
		}
	}
	return ""
}

// checkCoverage: every assignable partition exactly once to an eligible
// member, pins honoured, nothing else present.
func (g *naiveGroup) checkCoverage(out assign.Assignment) error {
	if out == nil {
		return fmt.Errorf("nil assignment")
	}
	if len(out) != len(g.partitions) {
		return fmt.Errorf("assignment has %d partitions, want %d assignable", len(out), len(g.partitions))
	}
	for _, p := range g.partitions {
		id, ok := out[p]
		if !ok {
			return fmt.Errorf("%v is assignable but absent", p)
		}
		if !g.eligible(id, p) {
			return fmt.Errorf("%v assigned to ineligible member %q", p, id)
		}
		if pinned, ok := g.pin(p); ok && id != pinned {
			return fmt.Errorf("%v pinned to %s but assigned to %s", p, pinned, id)
		}
	}
	return nil
}

// moves counts partitions that had an eligible owner and changed hands.
func (g *naiveGroup) moves(out assign.Assignment) int {
	n := 0
	for _, p := range g.partitions {
		if id, ok := g.original(p); ok && out[p] != id {
			n++
		}
	}
	return n
}

// minimumMoves is the fewest evictions that reach floor/ceil balance with
// homogeneous subscriptions: ceil quotas go to the members keeping most.
func (g *naiveGroup) minimumMoves() int {
	if len(g.members) == 0 {
		return 0
	}
	kept := map[string]int{}
	for _, p := range g.partitions {
		if id, ok := g.original(p); ok {
			kept[id]++
		}
	}
	byKept := slices.Clone(g.members)
	sort.SliceStable(byKept, func(i, j int) bool { return kept[byKept[i]] > kept[byKept[j]] })
	floor, ceilSlots := len(g.partitions)/len(g.members), len(g.partitions)%len(g.members)
	n := 0
	for i, id := range byKept {
		quota := floor
		if i < ceilSlots {
			quota++
		}
		n += max(0, kept[id]-quota)
	}
	return n
}

// checkMoves: with homogeneous subscriptions and no pins the move count is
// the minimum; otherwise no moved partition could individually go back to
// its previous owner while keeping balance (no gratuitous move).
func (g *naiveGroup) checkMoves(out assign.Assignment) error {
	if g.homogeneous() && !g.hasValidPins() {
		if got, want := g.moves(out), g.minimumMoves(); got != want {
			return fmt.Errorf("moved %d partitions, minimum is %d", got, want)
		}
	}
	for _, p := range g.partitions {
		previous, ok := g.original(p)
		if _, pinned := g.pin(p); !ok || pinned || out[p] == previous {
			continue
		}
		undone := maps.Clone(out)
		undone[p] = previous
		if g.balanceViolation(undone) == "" {
			return fmt.Errorf("%v moved %s -> %s, but moving it back keeps balance", p, previous, out[p])
		}
	}
	return nil
}

// checkSticky runs every property of Sticky on in; it returns the first
// broken one.
func checkSticky(in assign.Input, rng *rand.Rand) error {
	g := digest(in)
	out := assign.Sticky(in)
	if err := g.checkCoverage(out); err != nil {
		return fmt.Errorf("coverage: %w", err)
	}
	if v := g.balanceViolation(out); v != "" {
		return fmt.Errorf("balance: %s", v)
	}
	if err := g.checkMoves(out); err != nil {
		return fmt.Errorf("moves: %w", err)
	}
	again := assign.Sticky(shuffled(in, rng))
	if !maps.Equal(out, again) {
		return fmt.Errorf("determinism: shuffled input gave another assignment:\n%s\nvs\n%s", show(out), show(again))
	}
	return nil
}

// shuffled returns in with Members and Partitions reordered and every map
// rebuilt, so neither order nor map layout can leak into the result.
func shuffled(in assign.Input, rng *rand.Rand) assign.Input {
	out := assign.Input{
		Members:    slices.Clone(in.Members),
		Partitions: slices.Clone(in.Partitions),
		Current:    rebuild(in.Current, rng),
		Pins:       rebuild(in.Pins, rng),
	}
	rng.Shuffle(len(out.Members), func(i, j int) { out.Members[i], out.Members[j] = out.Members[j], out.Members[i] })
	rng.Shuffle(len(out.Partitions), func(i, j int) {
		out.Partitions[i], out.Partitions[j] = out.Partitions[j], out.Partitions[i]
	})
	return out
}

func rebuild(m map[assign.Partition]string, rng *rand.Rand) map[assign.Partition]string {
	if m == nil {
		return nil
	}
	keys := slices.Collect(maps.Keys(m))
	rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	out := make(map[assign.Partition]string, len(keys))
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}

// show prints an assignment or input map grouped by member, sorted.
func show(a map[assign.Partition]string) string {
	byMember := map[string][]string{}
	for p, id := range a {
		byMember[id] = append(byMember[id], fmt.Sprintf("%s/%d", p.Topic, p.Partition))
	}
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(byMember)) {
		list := byMember[id]
		slices.Sort(list)
		fmt.Fprintf(&b, "  %s: %s\n", id, strings.Join(list, " "))
	}
	return b.String()
}

func showInput(in assign.Input) string {
	var b strings.Builder
	for _, m := range in.Members {
		fmt.Fprintf(&b, "member %s topics %v\n", m.ID, slices.Sorted(maps.Keys(m.Topics)))
	}
	fmt.Fprintf(&b, "partitions %v\ncurrent:\n%spins:\n%s", in.Partitions, show(in.Current), show(in.Pins))
	return b.String()
}
