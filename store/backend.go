package store

// Backend is the contract the coordinator persists through (DESIGN §7).
// Every implementation — *Store (badger, the embedded default) and
// *LogStore (the Kafka log, or its in-memory twin MemLog) — keeps it, and
// the contract suite (contract_test.go) runs the same cases against each:
//
//  1. Synchronous. Update returns nil only once the batch is durable
//     (badger: synced to disk; Kafka: the transaction committed). A message
//     may be sent once Update returned nil — never before.
//  2. Atomic. One Update is one transaction: if fn returns an error, or any
//     check fails, nothing of the batch is written, even writes made before
//     the failure. A batch holds at most MaxBatchRecords records and
//     MaxBatchBytes bytes (ErrBatchTooBig otherwise, nothing written).
//  3. Monotonic. A partition epoch never goes down (ErrEpochRegression)
//     and is never deleted; a committed offset never goes down except
//     through ResetOffset (ErrOffsetRegression); the sync sequence never
//     goes down (ErrSeqRegression). Equal epochs and sequences are no-ops.
//     The checks are the Writer's, shared by every backend.
//  4. Checked on read. Load returns everything in one consistent view,
//     sorted; a record that does not decode gives ErrCorrupt naming its key.
//  5. Serialised. Concurrent Updates wait for each other; Load may run
//     concurrently with them and sees whole batches only.
//
// The Kafka log adds one rule badger cannot break: a writer deposed by a
// newer one (the broker bumped its producer epoch) fails its next Update
// with ErrFenced (a *FencedError) and every later one too; nothing of the
// failed batch is visible to anyone.
type Backend interface {
	// Update runs fn with a Writer and commits what it wrote as one
	// transaction (rules 1–3). fn must not call the Backend.
	Update(fn func(w *Writer) error) error
	// Load returns everything stored (rule 4).
	Load() (*Snapshot, error)
	// Close releases the backend; later calls return ErrClosed.
	Close() error
}

var _ Backend = (*Store)(nil)
