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
