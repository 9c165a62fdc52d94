package driver

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/capgate/capgate/coordinator/group"
)

// TestBulkBlockRoundTrips: a bulk block decodes to the entries encoded
// (random partitions of a block, a few shapes, flags), and every strict
// prefix of its value, and a value naming a state the machine has not,
// is refused as malformed — never a panic, never entries.
func TestBulkBlockRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	states := []group.PartitionState{group.Unowned, group.Owned, group.Revoking}
	for round := range 20 {
		k := blockKey{"g", "t", int32(rng.IntN(4))}
		entries := map[int32]bulkEntry{}
		for range 1 + rng.IntN(100) {
			p := k.block*unownedBlockSize + int32(rng.IntN(unownedBlockSize))
			entries[p] = bulkEntry{epoch: 1 + rng.Uint64N(1<<40), holderEpoch: rng.Uint64N(1 << 40), shape: &bulkShape{
				state: states[rng.IntN(3)], holder: []string{"", "a", "member-b"}[rng.IntN(3)], target: []string{"", "c"}[rng.IntN(2)],
				revokedMs: rng.Int64N(1 << 42), flags: partitionFlags{Released: rng.IntN(2) == 0, Forced: rng.IntN(2) == 0},
			}}
		}
		value := encodeBulkBlock(k, entries)
		got, err := decodeBulkBlock(k, value)
		if err != nil || !reflect.DeepEqual(got, entries) {
			t.Fatalf("round %d: decoded %d entries, %v; want the %d encoded", round, len(got), err, len(entries))
		}
		for n := range len(value) {
			if got, err := decodeBulkBlock(k, value[:n]); err == nil {
				t.Fatalf("round %d: %d of %d bytes decoded to %d entries", round, n, len(value), len(got))
			}
		}
	}
	bad := encodeBulkBlock(blockKey{"g", "t", 0}, map[int32]bulkEntry{3: {epoch: 2, shape: &bulkShape{state: "lost"}}})
	if _, err := decodeBulkBlock(blockKey{"g", "t", 0}, bad); err == nil {
		t.Fatal("a block with state \"lost\" decoded")
	}
}
