package store

import (
	"errors"
	"fmt"
)

// batch is one backend's transaction as a Writer sees it: reads see the
// batch's own earlier writes; nothing is visible to anyone else until the
// backend commits the batch. badgerBatch (badger.go) and logBatch (log.go)
// implement it. The regression checks, validation and bounds live in the
// Writer, once, for every backend.
type batch interface {
	reader
	set(key, value []byte) error
	delete(key []byte) error
}

// reader looks one key up; value is nil when found is false.
type reader interface {
	get(key []byte) (value []byte, found bool, err error)
}

var errWriterDone = errors.New("store: writer used after its Update returned")

// Writer stages the records of one Update; use it only inside fn. Checks
// that compare with stored values (epoch, offset, sync sequence) see the
// writes made earlier in the same batch. A method's error also fails the
// whole batch, and every later method returns it again.
type Writer struct {
	b   batch
	err error
	// records and bytes count what the batch holds, for the bounds every
	// backend shares (MaxBatchRecords, MaxBatchBytes).
	records int
	bytes   int
	// floor is MetaEpochFloor as this batch has it, once read (a bulk
	// write of new partitions checks it for each).
	floor      uint64
	floorKnown bool
}

// stage runs fn with a Writer over b, then detaches the Writer (later
// calls fail). It returns the batch's error: the Writer's first (even one
// fn ignored), else fn's. Only a nil error may be committed.
func stage(b batch, fn func(w *Writer) error) error {
	w := &Writer{b: b}
	err := fn(w)
	w.b = nil
	if w.err != nil {
		return w.err
	}
	return err
}

// do runs one write step, recording its error (a *RecordError: the
// operation and the record's name) as the batch's error.
func (w *Writer) do(op, name string, step func() error) error {
	if w.err != nil {
		return w.err
	}
	if w.b == nil {
		return errWriterDone
	}
	if err := step(); err != nil {
		w.err = &RecordError{Op: op, Record: name, Err: err}
	}
	return w.err
}

// recordOverhead is what one record costs beyond its key and value in the
// byte bound: badger's own accounting (2 meta bytes and an 8-byte version
// per entry, see badger's Txn.checkSize). batchReserve covers the bytes and
// the entry badger adds to every transaction for its commit marker, so the
// Writer's bound always fires before badger's own ErrTxnTooBig would.
const (
	recordOverhead = 12
	batchReserve   = 64
)

// count charges one record against the batch bounds.
func (w *Writer) count(key, value []byte) error {
	records := w.records + 1
	bytes := w.bytes + len(key) + len(value) + recordOverhead
	if records > MaxBatchRecords || bytes > MaxBatchBytes-batchReserve {
		return fmt.Errorf("%w: limit %d records, %d bytes", ErrBatchTooBig, MaxBatchRecords, MaxBatchBytes)
	}
	w.records, w.bytes = records, bytes
	return nil
}

// Records is how many records (puts and deletes) the batch holds so far,
// as counted against MaxBatchRecords.
func (w *Writer) Records() int { return w.records }

func (w *Writer) set(key, value []byte) error {
	if err := w.count(key, value); err != nil {
		return err
	}
	return w.b.set(key, value)
}

func (w *Writer) delete(key []byte) error {
	if err := w.count(key, nil); err != nil {
		return err
	}
	return w.b.delete(key)
}

// doPartition is do for a step on one partition, whose name
// (partitionName) is only rendered for an error: a revoke of a member
// holding 10,000 partitions stages 20,000 partition writes, and naming
// every one up front cost about as much as the writes' own checks.
func (w *Writer) doPartition(op, group, topic string, partition int32, step func() error) error {
	if w.err != nil {
		return w.err
	}
	if w.b == nil {
		return errWriterDone
	}
	if err := step(); err != nil {
		w.err = &RecordError{Op: op, Record: partitionName(group, topic, partition), Err: err}
	}
	return w.err
}

// lookup reads key through r and decodes it; found is false when absent.
// A value that does not decode gives ErrCorrupt naming the key.
func lookup(r reader, key []byte, decode func([]byte) error) (found bool, err error) {
	value, found, err := r.get(key)
	if err != nil {
		return false, fmt.Errorf("key %s: %w", keyName(key), err)
	}
	if !found {
		return false, nil
	}
	if err := decode(value); err != nil {
		return true, corrupt(key, err)
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
	found, err := lookup(w.b, key, func(value []byte) error {
		var err error
		v, err = decodeUint(value)
		return err
	})
	return v, found, err
}
