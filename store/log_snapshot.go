package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	"go.uber.org/zap"
)

// A snapshot bounds replay: the state of a shard at one commit record
// (covers), so a reader restores it and reads only the log after it. It
// holds the values exactly as the log does (the key ring sealed), cut into
// chunks of at most snapshotChunkBytes so each fits one Kafka record, with
// a SHA-256 over all chunks. Snapshots are an optimisation, never the
// truth: a reader that finds none, or one that fails any check, replays the
// whole log.
//
// Chunk value: format byte, string snapshot id, uvarint index, uvarint
// entry count, then per entry bytes key, bytes value (keys in order).
type logSnapshot struct {
	id        string // 32 hex digits, random
	covers    int64  // offset of the last commit record the state includes
	entries   int
	chunks    [][]byte
	sum       [sha256.Size]byte
	writtenMs int64 // unix ms, when it was taken (age checks)
}

// snapshotChunkBytes keeps a chunk well inside Kafka's default 1 MB
// record-batch limit.
const snapshotChunkBytes = 512 << 10

// newSnapshot encodes values (a capture of the state at covers).
func newSnapshot(values map[string][]byte, covers, nowMs int64) *logSnapshot {
	id := make([]byte, 16)
	rand.Read(id)
	snap := &logSnapshot{id: hex.EncodeToString(id), covers: covers, entries: len(values), writtenMs: nowMs}
	keys := slices.Sorted(maps.Keys(values))
	for start := 0; start < len(keys) || len(snap.chunks) == 0; {
		end, size := start, 0
		for end < len(keys) && (end == start || size+len(keys[end])+len(values[keys[end]])+8 <= snapshotChunkBytes) {
			size += len(keys[end]) + len(values[keys[end]]) + 8
			end++
		}
		e := newEncoder(size + 64)
		e.string(snap.id)
		e.uint(uint64(len(snap.chunks)))
		e.uint(uint64(end - start))
		for _, k := range keys[start:end] {
			e.string(k)
			e.bytes(values[k])
		}
		snap.chunks = append(snap.chunks, e.b)
		start = end
	}
	snap.sum = snapshotSum(snap.chunks)
	return snap
}

func snapshotSum(chunks [][]byte) [sha256.Size]byte {
	h := sha256.New()
	for _, c := range chunks {
		h.Write(c)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// decode checks the snapshot whole (sum, ids, indexes, entry count, key
// order) and returns its values.
func (s *logSnapshot) decode() (map[string][]byte, error) {
	if snapshotSum(s.chunks) != s.sum {
		return nil, fmt.Errorf("snapshot %s: checksum mismatch", s.id)
	}
	values := make(map[string][]byte, s.entries)
	last := ""
	for i, chunk := range s.chunks {
		d := newDecoder(chunk)
		id, index, n := d.string(), d.uint(), d.uint()
		if d.err == nil && (id != s.id || index != uint64(i) || n > uint64(len(chunk))) {
			return nil, fmt.Errorf("snapshot %s: chunk %d is %s/%d of %d entries", s.id, i, id, index, n)
		}
		for range n {
			key, value := d.string(), d.bytes()
			if d.err == nil && (len(values) > 0 && key <= last) {
				return nil, fmt.Errorf("snapshot %s: keys out of order", s.id)
			}
			values[key], last = value, key
		}
		if err := d.finish(); err != nil {
			return nil, fmt.Errorf("snapshot %s: chunk %d: %w", s.id, i, err)
		}
	}
	if len(values) != s.entries {
		return nil, fmt.Errorf("snapshot %s: %d entries, header says %d", s.id, len(values), s.entries)
	}
	return values, nil
}

// WriteSnapshot stores a snapshot of the state as of the last committed
// transaction, so the next reader restores it and replays only the log
// after it. Snapshots are taken one at a time; the writer keeps writing
// meanwhile.
func (l *LogStore) WriteSnapshot(ctx context.Context) error {
	l.snapshotting.Lock()
	defer l.snapshotting.Unlock()
	values, covers := l.state.capture()
	snap := newSnapshot(values, covers, l.opts.Now().UnixMilli())
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	if err := l.t.saveSnapshot(ctx, snap); err != nil {
		return fmt.Errorf("store: %s: save snapshot: %w", l.t.name(), err)
	}
	return nil
}

// maybeSnapshot starts a background snapshot once SnapshotEvery records
// were committed since the last one began. Callers hold writeMu and
// closeMu (read).
func (l *LogStore) maybeSnapshot(records int) {
	l.since += records
	if l.opts.SnapshotEvery <= 0 || l.since < l.opts.SnapshotEvery || !l.snapshotting.TryLock() {
		return
	}
	l.snapshotting.Unlock() // WriteSnapshot takes it again; a racing one just queues behind
	l.since = 0
	l.background.Add(1)
	go func() {
		defer l.background.Done()
		// Not cut short by Interrupt or Close: a snapshot is bounded by
		// Timeout on its own (WriteSnapshot), and one Close cut would leave
		// the next start replaying the whole log.
		if err := l.WriteSnapshot(context.WithoutCancel(l.ctx)); err != nil && l.ctx.Err() == nil {
			l.opts.Logger.Warn("snapshot failed; replay stays longer until the next one", zap.Error(err))
		}
	}()
}
