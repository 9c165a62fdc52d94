package assign_test

import (
	"maps"
	"testing"

	"github.com/capgate/capgate/coordinator/assign"
)

func TestRange(t *testing.T) {
	ab := topics("a", "b")
	cases := []struct {
		name string
		in   assign.Input
		want map[string][]assign.Partition
	}{
		{
			name: "kafka example: two members, two topics of three",
			in:   assign.Input{Members: members(ab, "C1", "C0"), Partitions: join(parts("b", 0, 3), parts("a", 0, 3))},
			want: map[string][]assign.Partition{
				"C0": join(parts("a", 0, 2), parts("b", 0, 2)),
				"C1": join(parts("a", 2, 3), parts("b", 2, 3)),
			},
		},
		{
			name: "per topic over its own subscribers",
			in: assign.Input{
				Members:    []assign.Member{{ID: "m0", Topics: topics("a")}, {ID: "m1", Topics: ab}, {ID: "m2"}},
				Partitions: join(parts("a", 0, 5), parts("b", 0, 2), parts("c", 0, 2)),
			},
			want: map[string][]assign.Partition{"m0": parts("a", 0, 3), "m1": join(parts("a", 3, 5), parts("b", 0, 2))},
		},
		{
			name: "current owners ignored",
			in: assign.Input{
				Members: members(ab, "m0", "m1"), Partitions: parts("a", 0, 4),
				Current: owned(map[string][]assign.Partition{"m1": parts("a", 0, 4)}),
			},
			want: map[string][]assign.Partition{"m0": parts("a", 0, 2), "m1": parts("a", 2, 4)},
		},
		{
			name: "valid pins override, others stay put",
			in: assign.Input{
				Members: members(ab, "m0", "m1"), Partitions: parts("a", 0, 4),
				Pins: map[assign.Partition]string{
					part("a", 0): "m1", part("a", 1): "ghost", part("a", 9): "m1", part("b", 0): "m0",
				},
			},
			want: map[string][]assign.Partition{"m0": parts("a", 1, 2), "m1": join(parts("a", 0, 1), parts("a", 2, 4))},
		},
		{
			name: "zero members",
			in:   assign.Input{Partitions: parts("a", 0, 4)},
			want: map[string][]assign.Partition{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, want := assign.Range(tc.in), owned(tc.want)
			if got == nil || !maps.Equal(got, want) {
				t.Fatalf("got\n%swant\n%s", show(got), show(want))
			}
		})
	}
}
