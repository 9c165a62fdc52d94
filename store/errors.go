package store

import "errors"

// Sentinel errors. Every error the store returns wraps one of these or a
// badger/OS error, with the operation and the key in front, e.g.
// "store: save epoch orders/payments/3: epoch regression: stored 7, new 5".
// Test them with errors.Is.
var (
	// ErrEpochRegression: a write would lower a partition epoch. Epochs are
	// the fence; a lower one would let a revoked capability back in.
	ErrEpochRegression = errors.New("epoch regression")
	// ErrOffsetRegression: a commit would move a committed offset backwards
	// without the admin reset flag.
	ErrOffsetRegression = errors.New("offset regression")
	// ErrSeqRegression: the sync sequence would go down; gateways ack by
	// sequence, so a lower one would make them skip updates.
	ErrSeqRegression = errors.New("sync sequence regression")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store closed")
	// ErrBatchTooBig: one Update holds more than badger can commit in one
	// transaction (see MaxBatchRecords). Nothing of the batch was written.
	ErrBatchTooBig = errors.New("batch too big for one transaction")
	// ErrCorrupt: a stored key or value does not decode. The error names
	// the key.
	ErrCorrupt = errors.New("corrupt record")
	// ErrFenced: a newer writer took this log over (on Kafka: the broker
	// bumped the producer epoch of the shard's transactional id). The
	// batch was not committed, and the backend refuses every later write:
	// the deposed writer must send nothing new and step down. Returned as
	// a *FencedError.
	ErrFenced = errors.New("fenced by a newer writer")
	// ErrBroken: an earlier write to the log failed (its outcome may be
	// unknown), so this backend refuses every later write. Opening the log
	// again (fence, then read to the end) learns what was committed.
	ErrBroken = errors.New("log backend unusable after a failed write")
	// ErrInvalid: a record handed to a Writer breaks a rule of its kind
	// (empty id, negative partition or offset, unknown state, bad JSON).
	ErrInvalid = errors.New("invalid record")
)

// FencedError is the typed form of ErrFenced: which log and which
// transactional id the writer lost.
type FencedError struct {
	Log             string // topic (or in-memory log name) and shard
	TransactionalID string
	Err             error // what the log answered, if anything
}

func (e *FencedError) Error() string {
	msg := "store: " + e.Log + ": " + ErrFenced.Error() + " on transactional id " + e.TransactionalID
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

func (e *FencedError) Unwrap() error { return e.Err }

// RecordError is the error of a Writer's step (every write error of an
// Update but the commit's own): the operation, the record it was on
// ("g/orders/3", "g/member-id": a tenant's names) and the cause, which
// wraps one of the sentinels above or a backend's read error. Whoever
// shows a store error beyond the log (an unauthenticated /readyz) tells
// it from the backend's own failures (ErrFenced, ErrBroken, a commit's
// I/O error) with errors.As and shows only that a write was refused.
type RecordError struct {
	Op     string // "save epoch"
	Record string // the record's name, "" for none
	Err    error
}

func (e *RecordError) Error() string {
	if e.Record == "" {
		return "store: " + e.Op + ": " + e.Err.Error()
	}
	return "store: " + e.Op + " " + e.Record + ": " + e.Err.Error()
}

func (e *RecordError) Unwrap() error { return e.Err }
