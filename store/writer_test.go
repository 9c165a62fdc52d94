package store_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/capgate/capgate/store"
)

func TestEpochRegressionRefusesWholeBatch(t *testing.T) {
	st, _ := openTemp(t)
	mustUpdate(t, st, func(w *store.Writer) error { return w.PutEpoch("g", "t", 3, 7) })
	before := mustLoad(t, st)

	err := st.Update(func(w *store.Writer) error {
		if err := w.PutEpoch("g", "t", 4, 1); err != nil { // fine on its own
			return err
		}
		if err := w.PutOffset("g", "t", 4, store.CommittedOffset{Offset: 9}); err != nil {
			return err
		}
		return w.PutEpoch("g", "t", 3, 5)
	})
	if !errors.Is(err, store.ErrEpochRegression) {
		t.Fatalf("err = %v, want ErrEpochRegression", err)
	}
	if want := "store: save epoch g/t/3: epoch regression: stored 7, new 5"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if after := mustLoad(t, st); !reflect.DeepEqual(after, before) {
		t.Fatalf("batch partly applied:\n got %+v\nwant %+v", after, before)
	}
}

func TestEpochRegressionWithinOneBatch(t *testing.T) {
	st, _ := openTemp(t)
	err := st.Update(func(w *store.Writer) error {
		w.PutEpoch("g", "t", 0, 5)
		return w.PutEpoch("g", "t", 0, 4)
	})
	if !errors.Is(err, store.ErrEpochRegression) {
		t.Fatalf("err = %v, want ErrEpochRegression", err)
	}
	if epoch, _ := st.Epoch("g", "t", 0); epoch != 0 {
		t.Fatalf("epoch %d stored from a failed batch", epoch)
	}
}

func TestEqualEpochIsNoop(t *testing.T) {
	st, _ := openTemp(t)
	for range 2 {
		mustUpdate(t, st, func(w *store.Writer) error { return w.PutEpoch("g", "t", 0, 5) })
	}
	if epoch, _ := st.Epoch("g", "t", 0); epoch != 5 {
		t.Fatalf("epoch %d, want 5", epoch)
	}
}

// A Writer error the caller ignores still fails the batch.
func TestIgnoredWriterErrorFailsBatch(t *testing.T) {
	st, _ := openTemp(t)
	mustUpdate(t, st, func(w *store.Writer) error { return w.PutEpoch("g", "t", 0, 5) })
	err := st.Update(func(w *store.Writer) error {
		w.PutEpoch("g", "t", 0, 1)
		w.PutDenied("jti", 100)
		return nil
	})
	if !errors.Is(err, store.ErrEpochRegression) {
		t.Fatalf("err = %v, want ErrEpochRegression", err)
	}
	if len(mustLoad(t, st).Denied) != 0 {
		t.Fatal("denied id written by a failed batch")
	}
}

func TestCallbackErrorDiscardsBatch(t *testing.T) {
	st, _ := openTemp(t)
	boom := errors.New("boom")
	err := st.Update(func(w *store.Writer) error {
		if err := w.PutEpoch("g", "t", 0, 1); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if epoch, _ := st.Epoch("g", "t", 0); epoch != 0 {
		t.Fatalf("epoch %d written by a failed batch", epoch)
	}
}

func TestWriterUnusableAfterUpdate(t *testing.T) {
	st, _ := openTemp(t)
	var kept *store.Writer
	mustUpdate(t, st, func(w *store.Writer) error { kept = w; return nil })
	if err := kept.PutEpoch("g", "t", 0, 1); err == nil {
		t.Fatal("a Writer kept after its Update still writes")
	}
}

func TestOffsetRegression(t *testing.T) {
	st, _ := openTemp(t)
	mustUpdate(t, st, func(w *store.Writer) error {
		return w.PutOffset("g", "t", 0, store.CommittedOffset{Offset: 100, Epoch: 1})
	})
	err := st.Update(func(w *store.Writer) error {
		return w.PutOffset("g", "t", 0, store.CommittedOffset{Offset: 99, Epoch: 2})
	})
	if !errors.Is(err, store.ErrOffsetRegression) {
		t.Fatalf("err = %v, want ErrOffsetRegression", err)
	}
	if !strings.HasPrefix(err.Error(), "store: save offset g/t/0: ") {
		t.Errorf("message %q does not name the operation and partition", err)
	}
	// Equal offset: metadata and epoch are replaced.
	same := store.CommittedOffset{Offset: 100, Metadata: "again", Epoch: 2}
	mustUpdate(t, st, func(w *store.Writer) error { return w.PutOffset("g", "t", 0, same) })
	if got, _, _ := st.Offset("g", "t", 0); got != same {
		t.Fatalf("offset %+v, want %+v", got, same)
	}
	// An admin reset may go back.
	reset := store.CommittedOffset{Offset: 10, Metadata: "reset", Epoch: 2}
	mustUpdate(t, st, func(w *store.Writer) error { return w.ResetOffset("g", "t", 0, reset) })
	if got, _, _ := st.Offset("g", "t", 0); got != reset {
		t.Fatalf("offset %+v after reset, want %+v", got, reset)
	}
}

func TestSeqNeverGoesDown(t *testing.T) {
	st, dir := openTemp(t)
	mustUpdate(t, st, func(w *store.Writer) error { return w.SaveSeq(10) })
	mustUpdate(t, st, func(w *store.Writer) error { return w.SaveSeq(10) })
	st = reopen(t, st, dir)
	err := st.Update(func(w *store.Writer) error { return w.SaveSeq(9) })
	if !errors.Is(err, store.ErrSeqRegression) {
		t.Fatalf("err = %v, want ErrSeqRegression", err)
	}
	mustUpdate(t, st, func(w *store.Writer) error { return w.SaveSeq(11) })
	if seq := mustLoad(t, st).Seq; seq != 11 {
		t.Fatalf("seq %d, want 11", seq)
	}
	// The sequence cannot be overwritten or deleted around the check.
	for name, write := range map[string]func(w *store.Writer) error{
		"PutMeta":    func(w *store.Writer) error { return w.PutMeta(store.MetaSyncSeq, []byte{1}) },
		"DeleteMeta": func(w *store.Writer) error { return w.DeleteMeta(store.MetaSyncSeq) },
	} {
		if err := st.Update(write); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s(sync_seq): %v, want ErrInvalid", name, err)
		}
	}
}

func TestGatewayKeepsEarliestFirstSeen(t *testing.T) {
	st, _ := openTemp(t)
	for _, ms := range []int64{50, 70, 30} {
		mustUpdate(t, st, func(w *store.Writer) error { return w.PutGateway("gw", ms) })
	}
	if got := mustLoad(t, st).Gateways; !reflect.DeepEqual(got, []store.Gateway{{ID: "gw", FirstSeenMs: 30}}) {
		t.Fatalf("gateways %+v", got)
	}
}

func TestPruneDenied(t *testing.T) {
	st, _ := openTemp(t)
	mustUpdate(t, st, func(w *store.Writer) error {
		return errors.Join(w.PutDenied("old", 99), w.PutDenied("edge", 100), w.PutDenied("new", 101))
	})
	deleted, err := st.PruneDenied(100)
	if err != nil || deleted != 1 {
		t.Fatalf("PruneDenied = %d, %v; want 1", deleted, err)
	}
	want := []store.Denied{{JTI: "edge", Exp: 100}, {JTI: "new", Exp: 101}}
	if got := mustLoad(t, st).Denied; !reflect.DeepEqual(got, want) {
		t.Fatalf("denied %+v, want %+v", got, want)
	}
	if deleted, err := st.PruneDenied(100); err != nil || deleted != 0 {
		t.Fatalf("second PruneDenied = %d, %v; want 0", deleted, err)
	}
}

func TestPruneDeniedManyInChunks(t *testing.T) {
	st, _ := openTemp(t)
	const n = 12_000 // more than one prune transaction
	mustUpdate(t, st, func(w *store.Writer) error {
		for i := range n {
			w.PutDenied(fmt.Sprintf("jti-%05d", i), int64(i%2)) // half expire
		}
		return nil
	})
	deleted, err := st.PruneDenied(1)
	if err != nil || deleted != n/2 {
		t.Fatalf("PruneDenied = %d, %v; want %d", deleted, err, n/2)
	}
	if got := len(mustLoad(t, st).Denied); got != n/2 {
		t.Fatalf("%d denied ids left, want %d", got, n/2)
	}
}

func TestInvalidRecordsAreRefused(t *testing.T) {
	st, _ := openTemp(t)
	for name, write := range map[string]func(w *store.Writer) error{
		"empty group":        func(w *store.Writer) error { return w.PutEpoch("", "t", 0, 1) },
		"empty topic":        func(w *store.Writer) error { return w.PutEpoch("g", "", 0, 1) },
		"negative partition": func(w *store.Writer) error { return w.PutEpoch("g", "t", -1, 1) },
		"unknown state": func(w *store.Writer) error {
			return w.PutPartitionState("g", "t", 0, store.PartitionState{State: "lost"})
		},
		"negative offset": func(w *store.Writer) error {
			return w.PutOffset("g", "t", 0, store.CommittedOffset{Offset: -1})
		},
		"config not JSON": func(w *store.Writer) error {
			return w.PutGroupConfig("g", store.GroupConfig{Config: []byte("{")})
		},
		"qos not JSON":      func(w *store.Writer) error { return w.PutQoS("q", []byte("nope"), 1) },
		"member without id": func(w *store.Writer) error { return w.PutMember("g", store.Member{}) },
		"lease no holder":   func(w *store.Writer) error { return w.PutLease("g", "t", 0, store.Lease{}) },
		"empty jti":         func(w *store.Writer) error { return w.PutDenied("", 1) },
		"empty key ring":    func(w *store.Writer) error { return w.PutKeyRing(nil) },
	} {
		if err := st.Update(write); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// Names with separators and NUL bytes round-trip and stay distinct.
func TestOddNamesRoundTrip(t *testing.T) {
	st, _ := openTemp(t)
	groups := []string{"a/b", "a", "a\x00", "ü", "a\x00b"}
	mustUpdate(t, st, func(w *store.Writer) error {
		for i, g := range groups {
			w.PutEpoch(g, "t/x", int32(i), uint64(i+1))
		}
		return nil
	})
	for i, g := range groups {
		if epoch, err := st.Epoch(g, "t/x", int32(i)); err != nil || epoch != uint64(i+1) {
			t.Errorf("Epoch(%q) = %d, %v; want %d", g, epoch, err, i+1)
		}
	}
	if got := len(mustLoad(t, st).Groups); got != len(groups) {
		t.Fatalf("%d groups loaded, want %d", got, len(groups))
	}
}

// Several goroutines raise epochs of one shared partition and write their
// own; run with -race. The shared epoch must end at the maximum, no write
// may be lost, and regressions must be refused rather than applied.
func TestConcurrentUpdates(t *testing.T) {
	st, _ := openTemp(t)
	const writers, rounds = 4, 15
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for g := range writers {
		wg.Go(func() {
			for r := range rounds {
				epoch := uint64(r*writers + g + 1)
				err := st.Update(func(w *store.Writer) error {
					if err := w.PutEpoch("g", "own", int32(g), epoch); err != nil {
						return err
					}
					return w.PutEpoch("g", "shared", 0, epoch)
				})
				if err != nil && !errors.Is(err, store.ErrEpochRegression) {
					errs <- err
				}
				if _, err := st.Load(); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if epoch, _ := st.Epoch("g", "shared", 0); epoch != writers*rounds {
		t.Fatalf("shared epoch %d, want %d", epoch, writers*rounds)
	}
}

// 10,000 partitions' epoch and state (20,000 records) commit in one batch.
func TestLargeBatch(t *testing.T) {
	st, dir := openTemp(t)
	const partitions = 10_000
	state := store.PartitionState{State: store.StateOwned, Owner: "member-0123456789", Epoch: 1, ExpiresAtMs: 1_700_000_000_000}
	mustUpdate(t, st, func(w *store.Writer) error {
		for p := range int32(partitions) {
			if err := w.PutEpoch("group-name", "topic-name", p, 1); err != nil {
				return err
			}
			if err := w.PutPartitionState("group-name", "topic-name", p, state); err != nil {
				return err
			}
		}
		return nil
	})
	st = reopen(t, st, dir)
	groups := mustLoad(t, st).Groups
	if len(groups) != 1 || len(groups[0].Partitions) != partitions {
		t.Fatalf("loaded %d groups", len(groups))
	}
	for i, record := range groups[0].Partitions {
		if record.Partition != int32(i) || record.Epoch != 1 || record.State == nil {
			t.Fatalf("partition %d: %+v", i, record)
		}
	}
}

// A batch at the limit commits; one record more fails whole with
// ErrBatchTooBig, before badger's own bound would.
func TestTooBigBatchWritesNothing(t *testing.T) {
	st, _ := openTemp(t)
	if got, want := int64(store.MaxBatchRecords), st.BadgerMaxBatchCount()-2; got != want {
		t.Fatalf("MaxBatchRecords = %d, badger allows %d", got, want)
	}
	if got, want := int64(store.MaxBatchBytes), st.BadgerMaxBatchSize(); got != want {
		t.Fatalf("MaxBatchBytes = %d, badger allows %d", got, want)
	}
	writeDenied := func(n int) error {
		return st.Update(func(w *store.Writer) error {
			for i := range n {
				if err := w.PutDenied(fmt.Sprint(i), 1); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := writeDenied(store.MaxBatchRecords + 1); !errors.Is(err, store.ErrBatchTooBig) {
		t.Fatalf("err = %v, want ErrBatchTooBig", err)
	}
	if n := len(mustLoad(t, st).Denied); n != 0 {
		t.Fatalf("%d records of a failed batch written", n)
	}
	if err := writeDenied(store.MaxBatchRecords); err != nil {
		t.Fatalf("a batch of MaxBatchRecords: %v", err)
	}
}
