package store

import (
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// logState is the materialized state of one shard's log: every live store
// key and its value as the log holds it (the key ring sealed), and the
// position it reflects. A follower applies the records it reads; the
// writer applies its own committed batches. Safe for concurrent use.
type logState struct {
	kek *KEK // unseals the key ring on Load; nil on a log without one

	mu      sync.RWMutex
	values  map[string][]byte
	applied int64 // offset of the last commit record applied; -1 none
	commits uint64
	// barriers counts the commits applied that were takeover barriers
	// (seq 0): a candidate's fence marker, written before it knows
	// whether its takeover succeeds, so no proof of a live leader.
	barriers uint64
	last     commitRecord // the last commit record applied
	beat     Beat         // the last beat applied (not a store value)
	// resigned: the last commit applied is a resignation (a beat with no
	// URL, LogStore.Resign).
	resigned bool
	// changed is closed and replaced whenever a commit is applied.
	changed chan struct{}

	// pending holds the records read since the last commit record: a
	// transaction is applied whole, when its commit record arrives.
	pending []logRecord
}

func newLogState(kek *KEK) *logState {
	return &logState{kek: kek, values: map[string][]byte{}, applied: -1, changed: make(chan struct{})}
}

// commitRecord ends every transaction on the log (key keyLogCommit).
type commitRecord struct {
	writer string
	nonce  []byte // 16 random bytes: one writer incarnation
	seq    uint64 // 0: the writer's opening barrier; then one per Update
}

const nonceSize = 16

func newNonce() []byte {
	nonce := make([]byte, nonceSize)
	rand.Read(nonce) // never fails (crypto/rand)
	return nonce
}

func encodeCommit(c commitRecord) []byte {
	e := newEncoder(len(c.writer) + nonceSize + 16)
	e.string(c.writer)
	e.bytes(c.nonce)
	e.uint(c.seq)
	return e.b
}

func decodeCommit(value []byte) (commitRecord, error) {
	d := newDecoder(value)
	c := commitRecord{writer: d.string(), nonce: d.bytes(), seq: d.uint()}
	if err := d.finish(); err != nil {
		return commitRecord{}, err
	}
	if len(c.nonce) != nonceSize {
		return commitRecord{}, fmt.Errorf("commit nonce of %d bytes", len(c.nonce))
	}
	return c, nil
}

// read applies records in log order: store records wait in pending until
// their transaction's commit record, which applies them at once. It
// returns the commit records it applied.
func (s *logState) read(records []logRecord) ([]commitRecord, error) {
	var commits []commitRecord
	for _, r := range records {
		if string(r.key) != keyLogCommit {
			s.pending = append(s.pending, r)
			continue
		}
		commit, err := decodeCommit(r.value)
		if err != nil {
			return commits, fmt.Errorf("offset %d: %w", r.offset, corrupt(r.key, err))
		}
		if err := s.apply(s.pending, r.offset, commit); err != nil {
			return commits, err
		}
		s.pending = s.pending[:0]
		commits = append(commits, commit)
	}
	return commits, nil
}

// apply makes one committed transaction's records the state at offset; a
// beat that does not decode refuses the transaction (nothing applied).
func (s *logState) apply(records []logRecord, offset int64, commit commitRecord) error {
	beat, beats := s.beat, false
	for _, r := range records {
		if string(r.key) == keyLogLeader {
			var err error
			if beat, err = decodeBeat(r.value); err != nil {
				return fmt.Errorf("offset %d: %w", offset, corrupt(r.key, err))
			}
			beats = true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if beats {
		s.beat = beat
	}
	s.resigned = beats && beat.resigned()
	for _, r := range records {
		if string(r.key) == keyLogLeader {
			continue
		}
		if r.value == nil {
			delete(s.values, string(r.key))
			continue
		}
		s.values[string(r.key)] = r.value
	}
	s.applied = offset
	s.commits++
	if commit.seq == 0 {
		s.barriers++
	}
	s.last = commit
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

// get is a point read for a Writer's checks.
func (s *logState) get(key []byte) ([]byte, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	value, found := s.values[string(key)]
	return value, found
}

// position is the offset of the last applied commit record (-1 before
// the first), how many commits (and barriers among them) were applied,
// and a channel closed at the next one.
func (s *logState) position() (applied int64, commits, barriers uint64, changed <-chan struct{}) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.applied, s.commits, s.barriers, s.changed
}

// load builds the Snapshot of the state: keys in order, the key ring
// unsealed, every value decoded strictly.
func (s *logState) load() (*Snapshot, error) {
	s.mu.RLock()
	keys := slices.Sorted(maps.Keys(s.values))
	values := make([][]byte, len(keys))
	for i, k := range keys {
		values[i] = s.values[k]
	}
	s.mu.RUnlock()
	builder := newSnapshotBuilder()
	for i, k := range keys {
		key, value := []byte(k), values[i]
		if k == keyLogSettings {
			continue // the log's own, checked by compatible (a meta value)
		}
		if k == prefixKeyRing {
			var err error
			if value, err = s.unseal(key, value); err != nil {
				return nil, err
			}
		}
		if err := builder.addRecord(key, value); err != nil {
			return nil, err
		}
	}
	return builder.finish(), nil
}

func (s *logState) unseal(key, value []byte) ([]byte, error) {
	if s.kek == nil {
		return value, nil
	}
	plain, err := s.kek.open(key, value)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", keyName(key), err)
	}
	return plain, nil
}

// capture copies the state for a snapshot: the values and the offset they
// reflect.
func (s *logState) capture() (map[string][]byte, int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.values), s.applied
}

// restore replaces the state with a snapshot's.
func (s *logState) restore(values map[string][]byte, covers int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values = values
	s.applied = covers
}
