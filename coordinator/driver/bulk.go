package driver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/store"
)

// Bulk blocks: a bulk fence (and what follows it) written as a few values.
//
// A member's revoke of 10,000 partitions fences them in one Ready: each
// goes revoking at a new epoch. Written on the partitions' own keys that
// is 20,000 store entries ("e/" and "s/"), ~1.1 MB in one transaction,
// the persist every gateway waits behind (BENCHMARKS §3: 253 ms at load
// ~30, the time in badger's index inserts). When one Ready writes at least
// runMin partitions of one group's topic (Driver.SetUnownedRunMin), each
// of them whose epoch is above the one stored on its own "e/" key goes
// instead into a bulk block, one meta value per unownedBlockSize
// partitions of the topic, holding its epoch and whole state:
//
//	meta "coordinator.bulk/" + [group, topic, block]
//	    format byte 1,
//	    uvarint s, then s shapes: string state, string holder, string target,
//	        varint revoke start (unix ms), byte flags (bit 0 holder outside,
//	        1 target outside, 2 released, 3 forced),
//	    uvarint n, then n entries ascending by partition: uvarint partition −
//	        previous, uvarint epoch, uvarint holder epoch, uvarint shape index
//
// (the first entry's previous is the block's first partition less one).
// The rule: an entry (p, E) holds p's epoch and state exactly while E is
// above p's epoch stored on its own key (none: 0). It is written only
// then, through store.Writer.CheckEpoch, so the store's monotonic rules
// (never below the stored epoch nor, for a new partition, the floor) hold
// for it; the Driver checks a new epoch of p against p's live entry too.
// A later write of p on its own keys stores an epoch ≥ E, so the entry is
// stale from then on without its block being written (it leaves the
// Driver's copy at once and the store at the block's next write): epochs
// only rise. A forgotten partition's block is written at once without it
// (its own epoch is deleted, and a stale entry would come back), and the
// forget raises the floor to a live entry's epoch too
// (store.Writer.ForgetPartitionAt), so the floor covers it.
//
// The first bulk block raises the store's layout (store.LayoutBulkBlocks):
// a build that predates bulk blocks would restore those partitions at an
// older epoch, so it refuses the store instead.
const (
	metaBulk   = "coordinator.bulk/"
	bulkFormat = 1
)

// bulkShape is what many entries of one block share.
type bulkShape struct {
	state          group.PartitionState
	holder, target string
	revokedMs      int64
	flags          partitionFlags
}

// bulkEntry is one partition's epoch and state in a bulk block; entries
// of one shape share it (a persist's run of records makes one, a decoded
// block one per shape).
type bulkEntry struct {
	epoch, holderEpoch uint64
	shape              *bulkShape
}

type bulkBlocks = blocks[bulkEntry]

// bulkEntryOf makes r's entry, sharing *last when r has its shape (the
// records of a bulk step come in runs of one shape) and making it last
// otherwise.
func bulkEntryOf(r group.PartitionRecord, last **bulkShape) bulkEntry {
	shape := bulkShape{
		state: r.State, holder: r.Holder, target: r.Target, revokedMs: ceilMilli(r.RevokeStarted),
		flags: partitionFlags{HolderOutside: r.HolderOutside, TargetOutside: r.TargetOutside, Released: r.Released, Forced: r.Forced},
	}
	if *last == nil || **last != shape {
		*last = &shape
	}
	return bulkEntry{epoch: r.Epoch, holderEpoch: r.HolderEpoch, shape: *last}
}

func (e bulkEntry) record(k partKey) group.PartitionRecord {
	f := e.shape.flags
	return group.PartitionRecord{
		Group: k.group, Topic: k.topic, Partition: k.partition, Epoch: e.epoch,
		State: e.shape.state, Holder: e.shape.holder, HolderEpoch: e.holderEpoch, Target: e.shape.target,
		RevokeStarted: fromMilli(e.shape.revokedMs),
		HolderOutside: f.HolderOutside, TargetOutside: f.TargetOutside, Released: f.Released, Forced: f.Forced,
	}
}

// bulkRuns returns the topics of groups that records write at least
// least partitions of (nil when none).
func bulkRuns(records []group.Record, least int) map[groupTopic]bool {
	return runsOf(records, least, func(p group.PartitionRecord) bool { return !p.Forgotten })
}

// checkBulkEpoch refuses a new epoch of k below its live bulk entry's.
func (d *Driver) checkBulkEpoch(k partKey, epoch uint64) (live bool, err error) {
	e, ok := d.bulk[blockOf(k)][k.partition]
	if ok && epoch < e.epoch {
		return true, fmt.Errorf("partition %s/%s/%d: %w: bulk block holds %d, new %d",
			k.group, k.topic, k.partition, store.ErrEpochRegression, e.epoch, epoch)
	}
	return ok, nil
}

// writeBulk stages r in its bulk block when its epoch is above the one
// stored on its own key; false: r goes on its own keys.
func (d *Driver) writeBulk(w *store.Writer, r group.PartitionRecord, s *staging) (bool, error) {
	k := partKey{r.Group, r.Topic, r.Partition}
	if _, err := d.checkBulkEpoch(k, r.Epoch); err != nil {
		return false, err
	}
	stored, err := w.CheckEpoch(r.Group, r.Topic, r.Partition, r.Epoch)
	if err != nil || r.Epoch <= stored {
		return false, err
	}
	s.bulkEdits.add(k, bulkEntryOf(r, &s.lastShape))
	if _, ok := d.unowned[blockOf(k)][k.partition]; ok {
		s.edits.dropEntry(k, false) // the bulk entry wins while live; stale after it
	}
	return true, nil
}

// leaveBulk notes that r, written on its own keys at an epoch ≥ its live
// bulk entry's, makes the entry stale.
func (d *Driver) leaveBulk(r group.PartitionRecord, s *staging) error {
	k := partKey{r.Group, r.Topic, r.Partition}
	live, err := d.checkBulkEpoch(k, r.Epoch)
	if live && err == nil {
		s.bulkEdits.dropEntry(k, false)
	}
	return err
}

// forgetBulk writes k's bulk block without k, in the persist that forgets
// k, and returns the epoch of k's live entry (0: none) — the stored
// one's, or one this persist staged — which the forget raises the floor
// to (store.Writer.ForgetPartitionAt). Not a PutEpoch of it first: the
// floor may have risen past it since (another partition forgotten, in
// this reap or before), and the store refuses a new partition's epoch
// below the floor — the reap's persist failed, at every restart too
// (review27, TestReapOfBulkOnlyPartitionsBelowTheFloor).
func (d *Driver) forgetBulk(k partKey, s *staging) uint64 {
	bk := blockOf(k)
	_, stored := d.bulk[bk]
	pending := s.bulkEdits[bk]
	if !stored && pending == nil {
		return 0
	}
	var epoch uint64
	if e, ok := d.bulk[bk][k.partition]; ok {
		epoch = e.epoch
	}
	if e, ok := pending.staged(k.partition); ok {
		epoch = e.epoch
		delete(pending.set, k.partition)
	}
	s.bulkEdits.dropEntry(k, true)
	return epoch
}

// writeBulkBlocks stages the bulk blocks edits write, raising the store's
// layout with them.
func (d *Driver) writeBulkBlocks(w *store.Writer, edits blockEdits[bulkEntry]) error {
	for _, be := range edits {
		if len(be.set) > 0 {
			if err := w.RaiseLayout(store.LayoutBulkBlocks); err != nil {
				return err
			}
			break
		}
	}
	return writeBlocks(w, metaBulk, d.bulk, edits, encodeBulkBlock)
}

// encodeBulkBlock writes block k's entries (bulk.go's format).
func encodeBulkBlock(k blockKey, entries map[int32]bulkEntry) []byte {
	parts := slices.Sorted(maps.Keys(entries))
	index := map[*bulkShape]uint64{}  // by the shared shape
	byValue := map[bulkShape]uint64{} // equal shapes of other persists
	var shapes []*bulkShape
	for _, p := range parts {
		sh := entries[p].shape
		if _, ok := index[sh]; ok {
			continue
		}
		i, ok := byValue[*sh]
		if !ok {
			i = uint64(len(shapes))
			byValue[*sh] = i
			shapes = append(shapes, sh)
		}
		index[sh] = i
	}
	out := make([]byte, 0, 16+len(shapes)*32+len(parts)*8)
	out = append(out, bulkFormat)
	out = binary.AppendUvarint(out, uint64(len(shapes)))
	for _, sh := range shapes {
		for _, str := range []string{string(sh.state), sh.holder, sh.target} {
			out = binary.AppendUvarint(out, uint64(len(str)))
			out = append(out, str...)
		}
		out = binary.AppendVarint(out, sh.revokedMs)
		out = append(out, flagBits(sh.flags))
	}
	out = binary.AppendUvarint(out, uint64(len(parts)))
	prev := k.block*unownedBlockSize - 1
	for _, p := range parts {
		e := entries[p]
		out = binary.AppendUvarint(out, uint64(p-prev))
		out = binary.AppendUvarint(out, e.epoch)
		out = binary.AppendUvarint(out, e.holderEpoch)
		out = binary.AppendUvarint(out, index[e.shape])
		prev = p
	}
	return out
}

func flagBits(f partitionFlags) byte {
	var b byte
	for i, set := range []bool{f.HolderOutside, f.TargetOutside, f.Released, f.Forced} {
		if set {
			b |= 1 << i
		}
	}
	return b
}

var errBadBulkBlock = errors.New("malformed bulk block")

// bulkReader reads a bulk block's fields; the first failure sticks.
type bulkReader struct {
	rest []byte
	ok   bool
}

func (r *bulkReader) uint() uint64 { return readVarint(r, binary.Uvarint) }
func (r *bulkReader) int() int64   { return readVarint(r, binary.Varint) }

func readVarint[T uint64 | int64](r *bulkReader, read func([]byte) (T, int)) T {
	v, n := read(r.rest)
	if n <= 0 {
		r.ok = false
		return 0
	}
	r.rest = r.rest[n:]
	return v
}

func (r *bulkReader) string() string {
	n := r.uint()
	if !r.ok || n > uint64(len(r.rest)) {
		r.ok = false
		return ""
	}
	s := string(r.rest[:n])
	r.rest = r.rest[n:]
	return s
}

func (r *bulkReader) byte() byte {
	if len(r.rest) == 0 {
		r.ok = false
		return 0
	}
	b := r.rest[0]
	r.rest = r.rest[1:]
	return b
}

// decodeBulkBlock reads block k's entries: partitions of block k,
// ascending, each epoch > 0, each state one the machine has.
func decodeBulkBlock(k blockKey, value []byte) (map[int32]bulkEntry, error) {
	if len(value) == 0 || value[0] != bulkFormat {
		return nil, errBadBulkBlock
	}
	r := &bulkReader{rest: value[1:], ok: true}
	ns := r.uint()
	if !r.ok || ns == 0 || ns > unownedBlockSize {
		return nil, errBadBulkBlock
	}
	shapes := make([]*bulkShape, 0, ns)
	for range ns {
		sh := &bulkShape{state: group.PartitionState(r.string()), holder: r.string(), target: r.string(), revokedMs: r.int()}
		bits := r.byte()
		sh.flags = partitionFlags{HolderOutside: bits&1 != 0, TargetOutside: bits&2 != 0, Released: bits&4 != 0, Forced: bits&8 != 0}
		switch {
		case !r.ok, bits > 15:
			return nil, errBadBulkBlock
		case sh.state != group.Unowned && sh.state != group.Owned && sh.state != group.Revoking:
			return nil, fmt.Errorf("%w: unknown state %q", errBadBulkBlock, sh.state)
		}
		shapes = append(shapes, sh)
	}
	n := r.uint()
	if !r.ok || n == 0 || n > unownedBlockSize {
		return nil, errBadBulkBlock
	}
	entries := make(map[int32]bulkEntry, n)
	p := int64(k.block)*unownedBlockSize - 1
	for range n {
		delta, epoch, holderEpoch, shape := r.uint(), r.uint(), r.uint(), r.uint()
		if !r.ok || delta == 0 || delta > unownedBlockSize || epoch == 0 || shape >= ns {
			return nil, errBadBulkBlock
		}
		p += int64(delta)
		if p > math.MaxInt32 || p/unownedBlockSize != int64(k.block) {
			return nil, errBadBulkBlock
		}
		entries[int32(p)] = bulkEntry{epoch: epoch, holderEpoch: holderEpoch, shape: shapes[shape]}
	}
	if len(r.rest) != 0 {
		return nil, errBadBulkBlock
	}
	return entries, nil
}
