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
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	if err := stage(badgerBatch{txn}, fn); err != nil {
		return err
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("store: commit batch: %w", err)
	}
	return nil
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
