package store

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// BenchmarkSyncBatch measures one synchronous Update against two raw badger
// baselines in the same run, interleaved iteration by iteration so machine
// noise hits all three alike: the same keys and values written with
// SyncWrites=false (what durability costs) and with SyncWrites=true (what
// the store's checks and encoding cost on top of the fsync). ns/op and
// allocs/op are the store's alone; the baselines and ratios are extra
// metrics.
func BenchmarkSyncBatch(b *testing.B) {
	b.Run("epoch+state", func(b *testing.B) { benchmarkSyncBatch(b, 1, true) })
	b.Run("100-epochs", func(b *testing.B) { benchmarkSyncBatch(b, 100, false) })
}

func benchmarkSyncBatch(b *testing.B, epochs int, withState bool) {
	st, err := Open(filepath.Join(b.TempDir(), "store"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	noSync := openBaseline(b, false)
	withSync := openBaseline(b, true)
	state := PartitionState{State: StateRevoking, Owner: "member-a", Target: "member-b", ExpiresAtMs: 1_700_000_000_000}

	var storeTime, noSyncTime, syncTime time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		epoch := uint64(i + 1)
		start := time.Now()
		err := st.Update(func(w *Writer) error {
			for p := range int32(epochs) {
				w.PutEpoch("group", "topic", p, epoch)
			}
			if withState {
				state.Epoch = epoch
				w.PutPartitionState("group", "topic", 0, state)
			}
			return nil
		})
		storeTime += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		noSyncTime += baselineWrite(b, noSync, epochs, epoch, withState, state)
		syncTime += baselineWrite(b, withSync, epochs, epoch, withState, state)
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(float64(noSyncTime.Nanoseconds())/n, "badger-nosync-ns/op")
	b.ReportMetric(float64(syncTime.Nanoseconds())/n, "badger-sync-ns/op")
	b.ReportMetric(float64(storeTime)/float64(noSyncTime), "x-vs-nosync")
	b.ReportMetric(float64(storeTime)/float64(syncTime), "x-vs-sync")
}

func openBaseline(b *testing.B, sync bool) *badger.DB {
	opts := badgerOptions(filepath.Join(b.TempDir(), "baseline"), Options{}).WithSyncWrites(sync)
	db, err := badger.Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// baselineWrite writes the same keys and values as the store does, in one
// plain transaction, and returns how long it took.
func baselineWrite(b *testing.B, db *badger.DB, epochs int, epoch uint64, withState bool, state PartitionState) time.Duration {
	start := time.Now()
	txn := db.NewTransaction(true)
	defer txn.Discard()
	for p := range int32(epochs) {
		if err := txn.Set(partitionKey(prefixEpoch, "group", "topic", p), encodeUint(epoch)); err != nil {
			b.Fatal(err)
		}
	}
	if withState {
		if err := txn.Set(partitionKey(prefixState, "group", "topic", 0), encodeState(state)); err != nil {
			b.Fatal(err)
		}
	}
	if err := txn.Commit(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkBulkRevokeBatch: the Update of a revoke of a member holding
// 10,000 partitions (BENCHMARKS §3's bulk fence) — each partition's
// epoch raised and its state set to revoking, 20,000 writes in one
// synchronous badger transaction over partitions the store holds
// already. ns/op is the whole Update; stage-ms is the Writer's part (the
// epochs' regression reads, encoding, the transaction's staging),
// commit-ms badger's (write-ahead log, fsync, memtable).
func BenchmarkBulkRevokeBatch(b *testing.B) {
	st, err := Open(filepath.Join(b.TempDir(), "store"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const partitions = 10_000
	write := func(epoch uint64, state string) func(w *Writer) error {
		return func(w *Writer) error {
			for p := range int32(partitions) {
				if err := w.PutEpoch("bulk-g", "bulk", p, epoch); err != nil {
					return err
				}
				s := PartitionState{State: state, Owner: "svc-0123456789abcdef", Epoch: epoch - 1, RevokedAtMs: 1_700_000_000_000}
				if err := w.PutPartitionState("bulk-g", "bulk", p, s); err != nil {
					return err
				}
			}
			return nil
		}
	}
	if err := st.Update(write(1, StateOwned)); err != nil {
		b.Fatal(err)
	}
	var staged, committed time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		var mid time.Time
		start := time.Now()
		if err := st.update(write(uint64(i+2), StateRevoking), func() { mid = time.Now() }); err != nil {
			b.Fatal(err)
		}
		staged += mid.Sub(start)
		committed += time.Since(mid)
	}
	n := float64(b.N) * 1e6
	b.ReportMetric(float64(staged.Nanoseconds())/n, "stage-ms")
	b.ReportMetric(float64(committed.Nanoseconds())/n, "commit-ms")
}
