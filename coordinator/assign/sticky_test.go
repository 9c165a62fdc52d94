package assign_test

import (
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/capgate/capgate/coordinator/assign"
)

// parts returns topic partitions from..to-1.
func parts(topic string, from, to int) []assign.Partition {
	var out []assign.Partition
	for p := from; p < to; p++ {
		out = append(out, assign.Partition{Topic: topic, Partition: int32(p)})
	}
	return out
}

func part(topic string, p int32) assign.Partition {
	return assign.Partition{Topic: topic, Partition: p}
}

func topics(names ...string) map[string]bool {
	set := map[string]bool{}
	for _, name := range names {
		set[name] = true
	}
	return set
}

// members gives every id the same topic set.
func members(set map[string]bool, ids ...string) []assign.Member {
	out := make([]assign.Member, len(ids))
	for i, id := range ids {
		out[i] = assign.Member{ID: id, Topics: set}
	}
	return out
}

// owned turns member -> partitions into an assignment.
func owned(byMember map[string][]assign.Partition) assign.Assignment {
	out := assign.Assignment{}
	for id, list := range byMember {
		for _, p := range list {
			out[p] = id
		}
	}
	return out
}

func join(lists ...[]assign.Partition) []assign.Partition {
	var out []assign.Partition
	for _, list := range lists {
		out = append(out, list...)
	}
	return out
}

type stickyCase struct {
	name  string
	in    assign.Input
	want  map[string][]assign.Partition
	moves int // partitions whose eligible current owner changed
}

func stickyCases() []stickyCase {
	a := topics("a")
	twelve := owned(map[string][]assign.Partition{
		"m0": parts("a", 0, 4), "m1": parts("a", 4, 8), "m2": parts("a", 8, 12),
	})
	return []stickyCase{
		{
			name: "fresh group",
			in:   assign.Input{Members: members(a, "m2", "m0", "m1"), Partitions: parts("a", 0, 7)},
			want: map[string][]assign.Partition{
				"m0": {part("a", 0), part("a", 3), part("a", 6)},
				"m1": {part("a", 1), part("a", 4)},
				"m2": {part("a", 2), part("a", 5)},
			},
		},
		{
			name: "one joins: one partition from each, highest first",
			in:   assign.Input{Members: members(a, "m0", "m1", "m2", "m3"), Partitions: parts("a", 0, 12), Current: twelve},
			want: map[string][]assign.Partition{
				"m0": parts("a", 0, 3), "m1": parts("a", 4, 7), "m2": parts("a", 8, 11),
				"m3": {part("a", 3), part("a", 7), part("a", 11)},
			},
			moves: 3,
		},
		{
			name: "one leaves: its partitions spread, nothing else moves",
			in: assign.Input{
				Members: members(a, "m0", "m2", "m3"), Partitions: parts("a", 0, 12),
				Current: owned(map[string][]assign.Partition{
					"m0": parts("a", 0, 3), "m1": parts("a", 3, 6), "m2": parts("a", 6, 9), "m3": parts("a", 9, 12),
				}),
			},
			want: map[string][]assign.Partition{
				"m0": parts("a", 0, 4),
				"m2": join(parts("a", 6, 9), parts("a", 4, 5)),
				"m3": join(parts("a", 9, 12), parts("a", 5, 6)),
			},
		},
		{
			name: "partition count increase: new ones to least loaded, nobody moves",
			in:   assign.Input{Members: members(a, "m0", "m1", "m2"), Partitions: parts("a", 0, 14), Current: twelve},
			want: map[string][]assign.Partition{
				"m0": join(parts("a", 0, 4), parts("a", 12, 13)),
				"m1": join(parts("a", 4, 8), parts("a", 13, 14)),
				"m2": parts("a", 8, 12),
			},
		},
		{
			name: "pin moves a partition and counts toward load",
			in: assign.Input{
				Members: members(a, "m0", "m1"), Partitions: parts("a", 0, 4),
				Current: owned(map[string][]assign.Partition{"m0": parts("a", 0, 2), "m1": parts("a", 2, 4)}),
				Pins:    map[assign.Partition]string{part("a", 2): "m0"},
			},
			want: map[string][]assign.Partition{
				"m0": {part("a", 0), part("a", 2)},
				"m1": {part("a", 1), part("a", 3)},
			},
			moves: 2,
		},
		{
			name: "pins beyond balance stay",
			in: assign.Input{
				Members: members(a, "m0", "m1"), Partitions: parts("a", 0, 4),
				Pins: map[assign.Partition]string{part("a", 0): "m0", part("a", 1): "m0", part("a", 2): "m0"},
			},
			want: map[string][]assign.Partition{"m0": parts("a", 0, 3), "m1": parts("a", 3, 4)},
		},
		{
			name: "pinned member absent: pin ignored",
			in: assign.Input{
				Members: members(a, "m0", "m1"), Partitions: parts("a", 0, 4),
				Current: owned(map[string][]assign.Partition{"m0": parts("a", 0, 1), "m1": parts("a", 2, 4)}),
				Pins:    map[assign.Partition]string{part("a", 0): "ghost", part("a", 1): "ghost"},
			},
			want: map[string][]assign.Partition{"m0": parts("a", 0, 2), "m1": parts("a", 2, 4)},
		},
		{
			name: "pinned member not subscribed: pin ignored",
			in: assign.Input{
				Members:    []assign.Member{{ID: "m0", Topics: a}, {ID: "m1", Topics: topics("b")}},
				Partitions: join(parts("a", 0, 2), parts("b", 0, 1)),
				Current:    owned(map[string][]assign.Partition{"m0": parts("a", 0, 2)}),
				Pins:       map[assign.Partition]string{part("a", 0): "m1"},
			},
			want: map[string][]assign.Partition{"m0": parts("a", 0, 2), "m1": parts("b", 0, 1)},
		},
		{
			name: "heterogeneous: a needed chain of two moves",
			in: assign.Input{
				Members: []assign.Member{
					{ID: "m0", Topics: a}, {ID: "m1", Topics: topics("a", "b")}, {ID: "m2", Topics: topics("b")},
				},
				Partitions: join(parts("a", 0, 3), parts("b", 0, 1)),
				Current:    owned(map[string][]assign.Partition{"m0": parts("a", 0, 3), "m1": parts("b", 0, 1)}),
			},
			want: map[string][]assign.Partition{
				"m0": parts("a", 0, 2), "m1": parts("a", 2, 3), "m2": parts("b", 0, 1),
			},
			moves: 2,
		},
		{
			name: "heterogeneous fresh group",
			in: assign.Input{
				Members: []assign.Member{
					{ID: "m0", Topics: topics("a", "b")}, {ID: "m1", Topics: a}, {ID: "m2", Topics: topics("b")},
				},
				Partitions: join(parts("a", 0, 4), parts("b", 0, 4)),
			},
			want: map[string][]assign.Partition{
				"m0": {part("a", 0), part("a", 2), part("b", 2)},
				"m1": {part("a", 1), part("a", 3)},
				"m2": {part("b", 0), part("b", 1), part("b", 3)},
			},
		},
		{
			name: "members without eligible topics get nothing",
			in: assign.Input{
				Members:    []assign.Member{{ID: "m0", Topics: a}, {ID: "m1", Topics: topics("x")}, {ID: "m2"}},
				Partitions: parts("a", 0, 3),
				Current:    owned(map[string][]assign.Partition{"m1": parts("a", 0, 2)}),
			},
			want: map[string][]assign.Partition{"m0": parts("a", 0, 3)},
		},
		{
			name: "zero members: empty assignment",
			in: assign.Input{
				Partitions: parts("a", 0, 3),
				Current:    owned(map[string][]assign.Partition{"m0": parts("a", 0, 3)}),
				Pins:       map[assign.Partition]string{part("a", 0): "m0"},
			},
			want: map[string][]assign.Partition{},
		},
		{
			name: "topics nobody subscribes to are absent, stale entries ignored",
			in: assign.Input{
				Members:    members(a, "m0"),
				Partitions: join(parts("a", 0, 2), parts("b", 0, 2)),
				Current:    owned(map[string][]assign.Partition{"m0": parts("b", 0, 1), "m9": parts("a", 0, 9)}),
				Pins:       map[assign.Partition]string{part("a", 7): "m0"},
			},
			want: map[string][]assign.Partition{"m0": parts("a", 0, 2)},
		},
		{
			name: "duplicate members merge topics, duplicate partitions count once",
			in: assign.Input{
				Members:    []assign.Member{{ID: "m0", Topics: a}, {ID: "m1", Topics: a}, {ID: "m0", Topics: topics("b")}},
				Partitions: join(parts("a", 0, 2), parts("b", 0, 1), parts("a", 0, 2)),
			},
			// b has one subscriber, so it is placed first.
			want: map[string][]assign.Partition{"m0": {part("a", 1), part("b", 0)}, "m1": {part("a", 0)}},
		},
	}
}

func TestSticky(t *testing.T) {
	for _, tc := range stickyCases() {
		t.Run(tc.name, func(t *testing.T) {
			want := owned(tc.want)
			got := assign.Sticky(tc.in)
			if got == nil || !maps.Equal(got, want) {
				t.Fatalf("got\n%swant\n%s", show(got), show(want))
			}
			if moves := digest(tc.in).moves(got); moves != tc.moves {
				t.Errorf("moved %d partitions, want %d", moves, tc.moves)
			}
			if err := checkSticky(tc.in, rand.New(rand.NewPCG(1, 2))); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestStickyDoesNotModifyInput guards the promise that callers may reuse
// their Input.
func TestStickyDoesNotModifyInput(t *testing.T) {
	in := assign.Input{
		Members:    members(topics("a"), "m2", "m1", "m0"),
		Partitions: []assign.Partition{part("a", 3), part("a", 1), part("a", 2), part("a", 0)},
		Current:    map[assign.Partition]string{part("a", 0): "m2"},
		Pins:       map[assign.Partition]string{part("a", 1): "m0"},
	}
	before := shuffled(in, rand.New(rand.NewPCG(0, 0)))
	copy(before.Members, in.Members)
	copy(before.Partitions, in.Partitions)
	assign.Sticky(in)
	assign.Range(in)
	for i := range in.Members {
		if in.Members[i].ID != before.Members[i].ID || in.Partitions[i] != before.Partitions[i] {
			t.Fatalf("input reordered: %v %v", in.Members, in.Partitions)
		}
	}
	if !maps.Equal(in.Current, before.Current) || !maps.Equal(in.Pins, before.Pins) {
		t.Fatal("input maps changed")
	}
}

func TestLookup(t *testing.T) {
	in := assign.Input{Members: members(topics("a"), "m0", "m1"), Partitions: parts("a", 0, 3)}
	for _, name := range []string{"", assign.NameSticky, assign.NameRange} {
		f, ok := assign.Lookup(name)
		if !ok || f == nil {
			t.Fatalf("Lookup(%q) = _, %v", name, ok)
		}
		if got := f(in); len(got) != 3 {
			t.Errorf("Lookup(%q) assignor placed %d partitions, want 3", name, len(got))
		}
	}
	if _, ok := assign.Lookup("roundrobin"); ok {
		t.Error("Lookup(roundrobin) found an assignor")
	}
}
