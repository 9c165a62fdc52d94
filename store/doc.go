// Package store keeps the coordinator's durable state (DESIGN §7) behind
// one contract, Backend (backend.go), with badger (*Store, the embedded
// default) as one implementation:
// partition epochs, handoff states, committed offsets, leases, group
// configs and members, denied capability ids, revoked members, QoS
// overrides, known gateways, the sync sequence and the signing key ring.
//
// The contract the coordinator shell relies on ("persist before send"),
// as badger keeps it (backend.go states it for every backend):
//
//  1. Synchronous. Update returns only after badger has synced the batch to
//     disk (SyncWrites). A message may be sent once Update returned nil.
//  2. Atomic. One Update is one badger transaction: if fn returns an error,
//     or any check fails, nothing of the batch is written, even writes made
//     before the failure. A batch holds at most MaxBatchRecords records and
//     MaxBatchBytes bytes (ErrBatchTooBig otherwise, nothing written).
//  3. Monotonic. A partition epoch never goes down (ErrEpochRegression) and
//     is never deleted; a committed offset never goes down except through
//     ResetOffset (ErrOffsetRegression); the sync sequence never goes down
//     (ErrSeqRegression). Equal epochs and sequences are no-ops.
//  4. Checked on read. Every value starts with a format byte and is decoded
//     strictly; a corrupt key or value gives ErrCorrupt naming the key.
//
// Use:
//
//	st, err := store.Open(dir, store.Options{Logger: log})
//	defer st.Close()
//	snapshot, err := st.Load() // on restart: everything, sorted
//	err = st.Update(func(w *store.Writer) error {
//		if err := w.PutEpoch("g", "orders", 3, 8); err != nil {
//			return err
//		}
//		return w.PutPartitionState("g", "orders", 3, store.PartitionState{
//			State: store.StateRevoking, Owner: "a", Target: "b", Epoch: 7})
//	})
//
// The key layout and value encodings are listed in keys.go. The data
// directory is 0700 and its files 0600 (the signing keys live there).
//
// Concurrency: a Store is safe for concurrent use. Updates are serialised
// (each waits for the previous one's sync); reads (Load, Epoch, Offset,
// Offsets) run concurrently on consistent snapshots. A Writer belongs to
// its Update's fn and must not be kept or shared; fn must not call the
// Store (a nested Update deadlocks).
package store
