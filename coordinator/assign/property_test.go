package assign_test

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/capgate/capgate/coordinator/assign"
)

var propertySeed = flag.Uint64("assign.seed", 1, "base seed of TestStickyProperties and TestRangeProperties")

const propertyCases = 3000

// TestStickyProperties checks Sticky against the naive checker on random
// groups. Case i uses rand.NewPCG(seed, i); a failure prints both.
func TestStickyProperties(t *testing.T) {
	seed := *propertySeed
	for i := range uint64(propertyCases) {
		rng := rand.New(rand.NewPCG(seed, i))
		in := randomInput(rng)
		if err := checkSticky(in, rng); err != nil {
			t.Fatalf("seed %d case %d (rerun: go test -run TestStickyProperties -assign.seed %d): %v\ninput:\n%s",
				seed, i, seed, err, showInput(in))
		}
	}
}

// TestRangeProperties compares Range with a naive range assignor.
func TestRangeProperties(t *testing.T) {
	seed := *propertySeed
	for i := range uint64(propertyCases) {
		rng := rand.New(rand.NewPCG(seed, i))
		in := randomInput(rng)
		got, want := assign.Range(in), naiveRange(in)
		if !maps.Equal(got, want) {
			t.Fatalf("seed %d case %d: Range gave\n%swant\n%sinput:\n%s", seed, i, show(got), show(want), showInput(in))
		}
		if again := assign.Range(shuffled(in, rng)); !maps.Equal(got, again) {
			t.Fatalf("seed %d case %d: Range not deterministic under shuffling", seed, i)
		}
	}
}

// naiveRange restates Kafka's range assignor, then applies pins.
func naiveRange(in assign.Input) assign.Assignment {
	g := digest(in)
	out := assign.Assignment{}
	byTopic := map[string][]assign.Partition{}
	for _, p := range g.partitions {
		byTopic[p.Topic] = append(byTopic[p.Topic], p)
	}
	for _, partitions := range byTopic {
		members := g.eligibleFor(partitions[0])
		for i, p := range partitions {
			// Member k takes indexes [k*n + min(k, extra), ...): invert it.
			n, extra := len(partitions)/len(members), len(partitions)%len(members)
			for k := len(members) - 1; k >= 0; k-- {
				if i >= k*n+min(k, extra) {
					out[p] = members[k]
					break
				}
			}
		}
	}
	for _, p := range g.partitions {
		if id, ok := g.pin(p); ok {
			out[p] = id
		}
	}
	return out
}

// randomInput draws a group: 0-30 members, 1-5 topics of 0-40 partitions,
// random (sometimes identical) subscriptions, current owners that are
// eligible, ineligible, departed or absent, and sometimes pins.
func randomInput(rng *rand.Rand) assign.Input {
	topics := make([]string, 1+rng.IntN(5))
	var in assign.Input
	for t := range topics {
		topics[t] = fmt.Sprintf("t%d", t)
		for p := range rng.IntN(41) {
			in.Partitions = append(in.Partitions, assign.Partition{Topic: topics[t], Partition: int32(p)})
		}
	}
	if len(in.Partitions) > 0 && rng.IntN(8) == 0 {
		in.Partitions = append(in.Partitions, in.Partitions[rng.IntN(len(in.Partitions))])
	}
	in.Members = randomMembers(rng, topics)
	in.Current = randomOwners(rng, in)
	if rng.IntN(3) == 0 {
		in.Pins = map[assign.Partition]string{}
		for range 1 + rng.IntN(4) {
			if p, id, ok := randomClaim(rng, in); ok {
				in.Pins[p] = id
			}
		}
	}
	return in
}

func randomMembers(rng *rand.Rand, topics []string) []assign.Member {
	ids := rng.Perm(100)
	identical := rng.IntN(3) == 0
	density := 0.2 + 0.8*rng.Float64()
	shared := randomTopics(rng, topics, density)
	members := make([]assign.Member, rng.IntN(31))
	for i := range members {
		members[i] = assign.Member{ID: fmt.Sprintf("m%02d", ids[i]), Topics: shared}
		if !identical {
			members[i].Topics = randomTopics(rng, topics, density)
		}
	}
	return members
}

func randomTopics(rng *rand.Rand, topics []string, density float64) map[string]bool {
	set := map[string]bool{}
	for _, topic := range topics {
		if rng.Float64() < density {
			set[topic] = true
		} else if rng.IntN(8) == 0 {
			set[topic] = false // explicitly not subscribed
		}
	}
	if rng.IntN(6) == 0 {
		set["no-partitions"] = true
	}
	return set
}

// randomOwners draws current owners. A third of the groups start from a
// previous Sticky assignment of a perturbed membership (joins, leaves),
// the realistic case; the rest are arbitrary.
func randomOwners(rng *rand.Rand, in assign.Input) map[assign.Partition]string {
	if len(in.Members) > 0 && rng.IntN(3) == 0 {
		previous := in
		previous.Members = nil
		for _, m := range in.Members {
			if rng.IntN(4) != 0 {
				previous.Members = append(previous.Members, m)
			}
		}
		if rng.IntN(2) == 0 {
			previous.Members = append(previous.Members, assign.Member{ID: "gone", Topics: in.Members[0].Topics})
		}
		previous.Current = nil
		return assign.Sticky(previous)
	}
	current := map[assign.Partition]string{}
	for range len(in.Partitions) {
		if p, id, ok := randomClaim(rng, in); ok {
			current[p] = id
		}
	}
	return current
}

// randomClaim picks a partition and a member for it: usually an eligible
// member, sometimes any member, a departed one or the empty ID.
func randomClaim(rng *rand.Rand, in assign.Input) (assign.Partition, string, bool) {
	if len(in.Partitions) == 0 {
		return assign.Partition{}, "", false
	}
	p := in.Partitions[rng.IntN(len(in.Partitions))]
	if rng.IntN(10) == 0 {
		p.Partition += 1000 // a partition that is not in the input
	}
	switch r := rng.IntN(10); {
	case r == 0:
		return p, fmt.Sprintf("gone-%d", rng.IntN(3)), true
	case r == 1:
		return p, "", true
	case len(in.Members) == 0:
		return p, "", false
	case r == 2:
		return p, in.Members[rng.IntN(len(in.Members))].ID, true
	}
	var eligible []string
	for _, m := range in.Members {
		if m.Topics[p.Topic] {
			eligible = append(eligible, m.ID)
		}
	}
	if len(eligible) == 0 {
		return p, "", false
	}
	return p, eligible[rng.IntN(len(eligible))], true
}

// FuzzSticky decodes a group from the fuzz bytes and runs the same checker.
func FuzzSticky(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 4, 12, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2})
	f.Add([]byte{2, 3, 5, 4, 3, 1, 2, 6, 0, 1, 2, 0, 1, 2, 0, 1, 2, 9, 9, 9, 9, 1, 0, 2, 1})
	f.Add([]byte{4, 9, 30, 7, 7, 7, 7, 7, 7, 7, 7, 7, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 3, 0, 5, 0, 2})
	f.Add([]byte{1, 1, 0, 1, 1, 1, 0x80, 0x41, 0x42, 0x43})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := decodeInput(data)
		if err := checkSticky(in, rand.New(rand.NewPCG(uint64(len(data)), 7))); err != nil {
			t.Fatalf("%v\ninput:\n%s", err, showInput(in))
		}
	})
}

// decodeInput reads a small group from bytes; missing bytes read as zero.
// Layout: topics, members, partitions per topic, one subscription mask
// per member, one owner byte per partition, then (pin partition, pin
// member) byte pairs.
func decodeInput(data []byte) assign.Input {
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := int(data[0])
		data = data[1:]
		return b
	}
	var in assign.Input
	topics := 1 + next()%4
	for t := range topics {
		for p := range next() % 24 {
			in.Partitions = append(in.Partitions, assign.Partition{Topic: fmt.Sprintf("t%d", t), Partition: int32(p)})
		}
	}
	for i := range next() % 12 {
		mask := next()
		member := assign.Member{ID: fmt.Sprintf("m%d", (i*7)%12), Topics: map[string]bool{}}
		for t := range topics {
			if mask&(1<<t) != 0 {
				member.Topics[fmt.Sprintf("t%d", t)] = true
			}
		}
		in.Members = append(in.Members, member)
	}
	in.Current = map[assign.Partition]string{}
	for _, p := range in.Partitions {
		if owner := next(); owner < 14 { // 12, 13: departed members
			in.Current[p] = fmt.Sprintf("m%d", owner)
		}
	}
	in.Pins = map[assign.Partition]string{}
	for len(data) >= 2 && len(in.Partitions) > 0 {
		p := in.Partitions[next()%len(in.Partitions)]
		in.Pins[p] = fmt.Sprintf("m%d", next()%14)
	}
	return in
}
