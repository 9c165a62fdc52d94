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
	w := &Writer{txn: txn}
	err := fn(w)
	w.txn = nil
	switch {
	case w.err != nil:
		return w.err
	case err != nil:
		return err
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("store: commit batch: %w", err)
	}
	return nil
}

var errWriterDone = errors.New("store: writer used after its Update returned")

// Writer stages the records of one Update; use it only inside fn. Checks
// that compare with stored values (epoch, offset, sync sequence) see the
// writes made earlier in the same batch. A method's error also fails the
// whole batch, and every later method returns it again.
type Writer struct {
	txn *badger.Txn
	err error
}

// do runs one write step, recording its error (wrapped with the operation
// and the record's name) as the batch's error.
func (w *Writer) do(op, name string, step func() error) error {
	if w.err != nil {
		return w.err
	}
	if w.txn == nil {
		return errWriterDone
	}
	if err := step(); err != nil {
		if name != "" {
			op += " " + name
		}
		w.err = fmt.Errorf("store: %s: %w", op, err)
	}
	return w.err
}

func (w *Writer) set(key, value []byte) error {
	return batchError(w.txn.Set(key, value))
}

func (w *Writer) delete(key []byte) error {
	return batchError(w.txn.Delete(key))
}

func batchError(err error) error {
	if errors.Is(err, badger.ErrTxnTooBig) {
		return fmt.Errorf("%w: limit %d records, %d bytes", ErrBatchTooBig, MaxBatchRecords, MaxBatchBytes)
	}
	return err
}

// getValue looks key up in txn and decodes it; found is false when absent.
// A value that does not decode gives ErrCorrupt naming the key.
func getValue(txn *badger.Txn, key []byte, decode func([]byte) error) (found bool, err error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var decodeErr error
	if err := item.Value(func(value []byte) error {
		decodeErr = decode(value)
		return nil
	}); err != nil {
		return true, fmt.Errorf("key %s: %w", keyName(key), err)
	}
	if decodeErr != nil {
		return true, corrupt(key, decodeErr)
	}
	return true, nil
}

func corrupt(key []byte, err error) error {
	return fmt.Errorf("key %s: %w: %w", keyName(key), ErrCorrupt, err)
}

func checkPartition(group, topic string, partition int32) error {
	switch {
	case group == "":
		return fmt.Errorf("%w: empty group", ErrInvalid)
	case topic == "":
		return fmt.Errorf("%w: empty topic", ErrInvalid)
	case partition < 0:
		return fmt.Errorf("%w: negative partition %d", ErrInvalid, partition)
	}
	return nil
}

func checkID(what, id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty %s", ErrInvalid, what)
	}
	return nil
}

// storedUint reads a uint record inside the batch.
func (w *Writer) storedUint(key []byte) (uint64, bool, error) {
	var v uint64
	found, err := getValue(w.txn, key, func(value []byte) error {
		var err error
		v, err = decodeUint(value)
		return err
	})
	return v, found, err
}
