package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/store"
)

// BenchmarkUpdateReady: one Update holding what the Ready of a 4th member
// joining a group of 3 (12 partitions) persists — the member, 3 partitions
// moving (epoch + revoking state each), their flags, the sync sequence: 9
// records — on badger (synced to disk), on the Kafka log (one transaction
// on a 3-broker kfake, replication factor 3) and on the in-memory log,
// interleaved iteration by iteration so machine noise hits all alike.
// ns/op is the sum of the three; the per-backend figures and the ratio are
// the extra metrics.
func BenchmarkUpdateReady(b *testing.B) {
	badger, _ := openBadgerBackend(b)
	kafka, _ := openKafkaBackend(b)
	mem, _ := openMemBackend(b)
	backends := []struct {
		name string
		st   store.Backend
		took time.Duration
	}{{"badger", badger, 0}, {"kafka", kafka, 0}, {"mem", mem, 0}}
	for i := 0; b.Loop(); i++ {
		for j := range backends {
			start := time.Now()
			if err := backends[j].st.Update(joinReady(uint64(i + 1))); err != nil {
				b.Fatal(err)
			}
			backends[j].took += time.Since(start)
		}
	}
	for _, be := range backends {
		b.ReportMetric(float64(be.took.Microseconds())/float64(b.N), be.name+"-µs/update")
	}
	b.ReportMetric(float64(backends[1].took)/float64(backends[0].took), "kafka/badger")
}

// joinReady is the batch of one rebalance step, epochs above e.
func joinReady(e uint64) func(w *store.Writer) error {
	return func(w *store.Writer) error {
		if err := w.PutMember("g", store.Member{ID: fmt.Sprint("member-", e), ClientID: "svc", Topics: []string{"orders"}, SessionTimeoutMs: 10000}); err != nil {
			return err
		}
		for p := range int32(3) {
			state := store.PartitionState{State: store.StateRevoking, Owner: "member-a", Target: "member-d", Epoch: e, RevokedAtMs: 1_700_000_000_000}
			if err := w.PutEpoch("g", "orders", p*4, e+1); err != nil {
				return err
			}
			if err := w.PutPartitionState("g", "orders", p*4, state); err != nil {
				return err
			}
		}
		if err := w.PutMeta("coordinator.partition_flags/[\"g\",\"orders\",0]", []byte(`{"released":true}`)); err != nil {
			return err
		}
		return w.SaveSeq(e)
	}
}

// BenchmarkReplay: how long a reader of the Kafka log takes to restore a
// shard of 100,000 records — from a snapshot plus the tail after it, and
// by replaying the whole log — in the same run. "keys=10k": the records
// rewrite 10,000 keys ten times (history the snapshot skips); "keys=100k":
// every record is a distinct live key (the snapshot holds them all too).
func BenchmarkReplay(b *testing.B) {
	for _, keys := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("records=100k/keys=%dk", keys/1000), func(b *testing.B) {
			benchmarkReplay(b, 100_000, keys)
		})
	}
}

func benchmarkReplay(b *testing.B, records, keys int) {
	opts := kafkaOptions(b)
	writer := openKafka(b, opts)
	const perBatch = 10_000
	for done := 0; done < records; done += perBatch {
		mustUpdate(b, writer, func(w *store.Writer) error {
			for i := range perBatch {
				key := (done + i) % keys
				if err := w.PutEpoch("g", fmt.Sprint("t", key/1000), int32(key%1000), uint64(done/keys+1)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := writer.WriteSnapshot(context.Background()); err != nil {
		b.Fatal(err)
	}
	mustUpdate(b, writer, func(w *store.Writer) error { return w.PutEpoch("g", "tail", 0, 1) }) // a tail of one
	end, _ := writer.Position()

	future := func() time.Time { return time.Now().Add(1000 * time.Hour) }
	restore := func(opts store.KafkaOptions) time.Duration {
		start := time.Now()
		f, err := store.FollowKafka(context.Background(), opts)
		if err != nil {
			b.Fatal(err)
		}
		waitApplied(b, f, end.Offset)
		took := time.Since(start)
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		return took
	}
	full := opts
	full.SnapshotMaxAge, full.Now = time.Hour, future // the snapshot is too old: ignored
	var withSnapshot, fullReplay time.Duration
	for b.Loop() {
		withSnapshot += restore(opts)
		fullReplay += restore(full)
	}
	n := float64(b.N)
	b.ReportMetric(float64(withSnapshot.Milliseconds())/n, "snapshot+tail-ms")
	b.ReportMetric(float64(fullReplay.Milliseconds())/n, "full-replay-ms")
	b.ReportMetric(float64(fullReplay)/float64(withSnapshot), "x-faster")
}
