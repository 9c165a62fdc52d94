package store

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// Update runs fn with a Writer and commits everything it wrote as one
// badger transaction, synced to disk before Update returns. If fn returns an
// error, or any Writer method failed (even one whose error fn ignored),
// nothing of the batch is written and Update returns that error (the
// Writer's first, else fn's). Updates are serialised: concurrent callers
// wait for each other.
func (s *Store) Update(fn func(w *Writer) error) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return fmt.Errorf("store: update: %w", ErrClosed)
	}
	return s.update(fn, nil)
}

// update is Update's work, writeMu and closeMu held; staged (if not nil)
// runs between the staging and the commit (BenchmarkBulkRevokeBatch
// times them apart).
func (s *Store) update(fn func(w *Writer) error, staged func()) error {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	b := &cachedBatch{badgerBatch: badgerBatch{txn}, s: s}
	if err := stage(b, fn); err != nil {
		return err
	}
	if staged != nil {
		staged()
	}
	if err := txn.Commit(); err != nil {
		s.epochs = nil // what reached the disk is unknown
		return fmt.Errorf("store: commit batch: %w", err)
	}
	for key, value := range b.staged {
		switch {
		case value == nil:
			delete(s.epochs, key)
		case s.cacheRoom(key):
			s.epochs[key] = value
		}
	}
	return nil
}

// cacheRoom reports whether key may be kept in s.epochs (making the map
// if needed): it is there already, or the map is below epochCacheMax.
func (s *Store) cacheRoom(key string) bool {
	if s.epochs == nil {
		s.epochs = map[string][]byte{}
	}
	if _, ok := s.epochs[key]; ok {
		return true
	}
	return len(s.epochs) < epochCacheMax
}

// cachedBatch is an Update's batch: a badger transaction whose epoch
// reads are answered from the store's cache (Store.epochs, which also
// knows keys found absent) when the key is there, after the batch's own writes of epoch keys (staged, nil for
// a delete), which the cache learns once the transaction committed.
type cachedBatch struct {
	badgerBatch
	s      *Store
	staged map[string][]byte
}

func isEpochKey(key []byte) bool {
	return len(key) > len(prefixEpoch) && string(key[:len(prefixEpoch)]) == prefixEpoch
}

func (b *cachedBatch) get(key []byte) ([]byte, bool, error) {
	if !isEpochKey(key) {
		return b.badgerBatch.get(key)
	}
	if value, ok := b.staged[string(key)]; ok {
		return value, value != nil, nil
	}
	if value, ok := b.s.epochs[string(key)]; ok {
		if len(value) == 0 {
			return nil, false, nil // epochAbsent
		}
		return value, true, nil
	}
	b.s.epochMisses++
	value, found, err := b.badgerBatch.get(key)
	if err == nil && b.s.cacheRoom(string(key)) {
		if !found {
			value = epochAbsent
		}
		b.s.epochs[string(key)] = value // committed: not written by this batch
	}
	if !found {
		value = nil
	}
	return value, found, err
}

// epochAbsent is the cache's value for an epoch key badger does not hold
// (a stored value is never empty: it starts with the format byte). The
// coordinator's bulk blocks keep a partition's epoch outside its key, so
// a bulk write reads many absent keys; without it each was a badger miss.
var epochAbsent = []byte{}

func (b *cachedBatch) set(key, value []byte) error {
	if err := b.badgerBatch.set(key, value); err != nil {
		return err
	}
	b.stage(key, value)
	return nil
}

func (b *cachedBatch) delete(key []byte) error {
	if err := b.badgerBatch.delete(key); err != nil {
		return err
	}
	b.stage(key, nil)
	return nil
}

// stage notes an epoch key's write (nil: deleted) for later reads of the
// batch and for the cache once committed.
func (b *cachedBatch) stage(key, value []byte) {
	if !isEpochKey(key) {
		return
	}
	if b.staged == nil {
		b.staged = map[string][]byte{}
	}
	b.staged[string(key)] = value
}

// badgerBatch is a badger read-write transaction as a Writer's batch.
type badgerBatch struct{ txn *badger.Txn }

func (b badgerBatch) get(key []byte) ([]byte, bool, error) {
	item, err := b.txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	value, err := item.ValueCopy(nil)
	return value, err == nil, err
}

func (b badgerBatch) set(key, value []byte) error { return badgerError(b.txn.Set(key, value)) }
func (b badgerBatch) delete(key []byte) error     { return badgerError(b.txn.Delete(key)) }

// badgerError maps badger's own transaction bound (a backstop: the Writer
// counts first) onto ErrBatchTooBig.
func badgerError(err error) error {
	if errors.Is(err, badger.ErrTxnTooBig) {
		return fmt.Errorf("%w: limit %d records, %d bytes", ErrBatchTooBig, MaxBatchRecords, MaxBatchBytes)
	}
	return err
}
