package coordinator

import (
	"slices"
	"testing"
)

// Lag is latest − committed, or latest − log start for a partition never
// committed (the defect's "lag 0" left those out); partitions Kafka did
// not answer for are counted apart; at most labels groups keep a label
// (the largest), the rest is summed.
func TestGroupLags(t *testing.T) {
	a0, a1, b0 := topicPartition{"a", 0}, topicPartition{"a", 1}, topicPartition{"b", 0}
	parts := []lagPartition{
		{"g1", a0, 40}, {"g1", a1, -1},
		{"g2", a0, 100}, {"g2", b0, 5},
		{"g3", a1, 90},
		{"g4", topicPartition{"c", 0}, 3},
	}
	ends := map[topicPartition]logEnds{a0: {0, 100}, a1: {50, 100}, b0: {0, 7}}
	r := groupLags(parts, ends, 2)
	want := []groupLag{{"g1", 60 + 50}, {"g3", 10}}
	if !slices.Equal(r.top, want) || r.rest != 2 || r.unmeasured != 1 {
		t.Fatalf("got top %v rest %d unmeasured %d; want top %v rest 2 unmeasured 1", r.top, r.rest, r.unmeasured, want)
	}
	if r := groupLags(parts, ends, 0); len(r.top) != 0 || r.rest != 122 {
		t.Fatalf("no labels: top %v rest %d, want everything in rest (122)", r.top, r.rest)
	}
}
