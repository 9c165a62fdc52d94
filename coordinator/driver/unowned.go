package driver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/store"
)

// Unowned blocks: a handoff completion written compactly.
//
// A handoff with nowhere to go ends with its partition unowned at the
// epoch it fenced (revoking → unowned, group/handoff.go's tryComplete).
// A member's revoke of 10,000 partitions completes 10,000 of them in one
// Ready once the gateways acknowledged: 10,000 writes of the same
// "unowned" state, 28–262 ms of badger, which the admin API's reads
// wait behind (BENCHMARKS §3). When one Ready leaves at least
// unownedRunMin partitions of one group's topic unowned
// (Driver.SetUnownedRunMin), persist writes their epochs as always (PutEpoch: a no-op when unchanged) and their
// states as entries of unowned blocks, one meta value per
// unownedBlockSize partitions of a topic:
//
//	meta "coordinator.unowned/" + [group, topic, block]
//	    format byte 1, uvarint n, then n × (uvarint partition − previous, uvarint epoch)
//
// where block is partition / unownedBlockSize, the entries ascend by
// partition, and the first one's previous is the block's first partition
// less one. An entry (p, E) says p became unowned at epoch E, after
// whatever state p's own key holds. Load reads p as unowned when p's
// stored epoch is E, and as its own key says otherwise. That is exact
// because at one epoch a partition's state only moves forward: the fence
// that raised it to E made it revoking, the handoff ends owned by its
// target at E or unowned at E, and an unowned partition leaves unowned
// only by a grant at a new epoch (grantNow). So a state written on p's
// own key after the entry at epoch E is unowned too (persist checks it
// all the same, and writes the block again without p if not), and one at
// another epoch makes the entry stale for good: epochs only rise. Stale
// entries leave the Driver's copy at once and the store when their block
// is next written. A forgotten partition (reap) has its block written at
// once: a forgotten epoch may come back, from the floor.
const (
	metaUnowned      = "coordinator.unowned/"
	unownedRunMin    = 64
	unownedBlockSize = 4096
	unownedFormat    = 1
)

// blockKey names one unowned block.
type blockKey struct {
	group, topic string
	block        int32
}

func blockOf(k partKey) blockKey {
	return blockKey{k.group, k.topic, k.partition / unownedBlockSize}
}

// blocks is the Driver's copy of one kind of stored block (unowned or
// bulk, bulk.go): every stored block has a key (its entries may all be
// stale and dropped), and its live entries, partition → entry.
type blocks[V any] map[blockKey]map[int32]V

// unownedBlocks: an entry is the epoch its partition became unowned at.
type unownedBlocks = blocks[uint64]

// groupTopic names one topic of one group.
type groupTopic struct{ group, topic string }

// unownedRuns returns the topics of groups that records leave unowned
// at least least partitions of (nil when none).
func unownedRuns(records []group.Record, least int) map[groupTopic]bool {
	return runsOf(records, least, compactable)
}

// runsOf returns the topics of groups of which at least least partition
// records pass pick (nil when none).
func runsOf(records []group.Record, least int, pick func(group.PartitionRecord) bool) map[groupTopic]bool {
	if len(records) < least {
		return nil
	}
	var counts map[groupTopic]int
	for _, r := range records {
		if p, ok := r.(group.PartitionRecord); ok && pick(p) {
			if counts == nil {
				counts = make(map[groupTopic]int)
			}
			counts[groupTopic{p.Group, p.Topic}]++
		}
	}
	var runs map[groupTopic]bool
	for k, n := range counts {
		if n >= least {
			if runs == nil {
				runs = make(map[groupTopic]bool)
			}
			runs[k] = true
		}
	}
	return runs
}

// compactable: a record an unowned block can say.
func compactable(r group.PartitionRecord) bool {
	return r.State == group.Unowned && !r.Forgotten && r.Epoch > 0
}

// blockEdits are one persist's changes to one kind of block, applied to
// the Driver's copy once the store committed them.
type blockEdits[V any] map[blockKey]*blockEdit[V]

type blockEdit[V any] struct {
	set   map[int32]V // entries this persist writes
	drop  []int32     // entries that end
	write bool        // the block is written in this persist
	// entries is the block as written (writeBlocks), which the Driver's
	// copy takes once committed (apply).
	entries map[int32]V
}

func (e blockEdits[V]) edit(k blockKey) *blockEdit[V] {
	be := e[k]
	if be == nil {
		be = &blockEdit[V]{}
		e[k] = be
	}
	return be
}

// add notes p's entry v, written in its block.
func (e blockEdits[V]) add(k partKey, v V) {
	be := e.edit(blockOf(k))
	if be.set == nil {
		be.set = make(map[int32]V)
	}
	be.set[k.partition] = v
	be.write = true
}

// staged is p's entry this persist writes, if any (be may be nil).
func (be *blockEdit[V]) staged(p int32) (V, bool) {
	var v V
	if be == nil {
		return v, false
	}
	v, ok := be.set[p]
	return v, ok
}

// dropEntry notes that p's entry ends; write: the block must be written
// without it now (else the stored entry is stale and stays until then).
func (e blockEdits[V]) dropEntry(k partKey, write bool) {
	be := e.edit(blockOf(k))
	be.drop = append(be.drop, k.partition)
	be.write = be.write || write
}

// noteWritten is persist's check of a partition written on its own key:
// what it does to p's entry, if p has one.
func (d *Driver) noteWritten(edits blockEdits[uint64], r group.PartitionRecord) {
	if len(d.unowned) == 0 {
		return
	}
	k := partKey{r.Group, r.Topic, r.Partition}
	b, ok := d.unowned[blockOf(k)]
	if !ok {
		return
	}
	epoch, has := b[k.partition]
	switch {
	case r.Forgotten:
		edits.dropEntry(k, true) // the block goes out without stale entries too
	case !has:
	case r.Epoch != epoch:
		edits.dropEntry(k, false) // stale for good: epochs only rise
	case r.State != group.Unowned:
		edits.dropEntry(k, true) // never happens (see above); stay exact
	}
}

// writeBlocks stages the blocks edits write, in key order, as meta
// values named prefix + block (metaName); stored is the Driver's copy.
func writeBlocks[V any](w *store.Writer, prefix string, stored blocks[V], edits blockEdits[V], encode func(blockKey, map[int32]V) []byte) error {
	keys := make([]blockKey, 0, len(edits))
	for k, be := range edits {
		if be.write {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, compareBlocks)
	for _, k := range keys {
		entries := edits[k].result(stored[k])
		edits[k].entries = entries
		name := metaName(prefix, partKey{k.group, k.topic, k.block})
		if len(entries) == 0 {
			if _, ok := stored[k]; ok {
				if err := w.DeleteMeta(name); err != nil {
					return err
				}
			}
			continue
		}
		if err := w.PutMeta(name, encode(k, entries)); err != nil {
			return err
		}
	}
	return nil
}

func compareBlocks(a, b blockKey) int {
	switch {
	case a.group != b.group:
		return cmpString(a.group, b.group)
	case a.topic != b.topic:
		return cmpString(a.topic, b.topic)
	}
	return int(a.block) - int(b.block)
}

func cmpString(a, b string) int {
	if a < b {
		return -1
	}
	return 1
}

// result is the block's entries after the edit.
func (be *blockEdit[V]) result(old map[int32]V) map[int32]V {
	out := make(map[int32]V, len(old)+len(be.set))
	for p, e := range old {
		out[p] = e
	}
	for _, p := range be.drop {
		delete(out, p)
	}
	for p, e := range be.set {
		out[p] = e
	}
	return out
}

// apply brings the Driver's copy up to date once the store committed.
func (b blocks[V]) apply(edits blockEdits[V]) {
	for k, be := range edits {
		if !be.write {
			for _, p := range be.drop {
				delete(b[k], p)
			}
			continue
		}
		entries := be.entries
		if entries == nil {
			entries = be.result(b[k])
		}
		if len(entries) == 0 {
			delete(b, k)
			continue
		}
		b[k] = entries
	}
}

// encodeBlock writes block k's entries; the first partition's delta is
// from the one before the block's first.
func encodeBlock(k blockKey, entries map[int32]uint64) []byte {
	parts := make([]int32, 0, len(entries))
	for p := range entries {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	out := make([]byte, 0, 2+len(parts)*4)
	out = append(out, unownedFormat)
	out = binary.AppendUvarint(out, uint64(len(parts)))
	prev := k.block*unownedBlockSize - 1
	for _, p := range parts {
		out = binary.AppendUvarint(out, uint64(p-prev))
		out = binary.AppendUvarint(out, entries[p])
		prev = p
	}
	return out
}

var errBadBlock = errors.New("malformed unowned block")

// decodeBlock reads a block's entries (partitions of block k, ascending,
// each epoch > 0).
func decodeBlock(k blockKey, value []byte) (map[int32]uint64, error) {
	if len(value) == 0 || value[0] != unownedFormat {
		return nil, errBadBlock
	}
	rest := value[1:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return 0, false
		}
		rest = rest[n:]
		return v, true
	}
	n, ok := next()
	if !ok || n == 0 || n > unownedBlockSize {
		return nil, errBadBlock
	}
	entries := make(map[int32]uint64, n)
	p := int64(k.block)*unownedBlockSize - 1
	for range n {
		delta, ok1 := next()
		epoch, ok2 := next()
		if !ok1 || !ok2 || delta == 0 || delta > unownedBlockSize || epoch == 0 {
			return nil, errBadBlock
		}
		p += int64(delta)
		if p > math.MaxInt32 || p/unownedBlockSize != int64(k.block) {
			return nil, errBadBlock
		}
		entries[int32(p)] = epoch
	}
	if len(rest) != 0 {
		return nil, errBadBlock
	}
	return entries, nil
}

// readBlock decodes one stored block named name (prefix + block) into
// stored, and its entries into byPartition.
func readBlock[V any](name, prefix string, value []byte, decode func(blockKey, []byte) (map[int32]V, error),
	stored blocks[V], byPartition map[partKey]V) error {
	pk, ok := parseMetaName(name, prefix)
	if !ok || pk.partition < 0 {
		return fmt.Errorf("meta %q: malformed block name", name)
	}
	k := blockKey{pk.group, pk.topic, pk.partition}
	entries, err := decode(k, value)
	if err != nil {
		return fmt.Errorf("meta %q: %w", name, err)
	}
	stored[k] = entries
	for p, v := range entries {
		byPartition[partKey{k.group, k.topic, p}] = v
	}
	return nil
}
