package store_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/capgate/capgate/store"
)

// The contract suite: every case runs against every backend — badger, the
// in-memory log twin and the Kafka log on a 3-broker kfake cluster — so the
// three keep one behaviour (backend.go).

// backendKind opens empty backends of one kind.
type backendKind struct {
	name string
	// open returns an empty backend, closed at cleanup, and a function
	// that closes a backend and opens the same durable state again (a
	// restart).
	open func(t testing.TB) (store.Backend, func(store.Backend) store.Backend)
}

func backendKinds() []backendKind {
	return []backendKind{
		{"badger", openBadgerBackend},
		{"mem", openMemBackend},
		{"kafka", openKafkaBackend},
	}
}

// forEachBackend runs test once per backend kind, as subtests.
func forEachBackend(t *testing.T, test func(t *testing.T, st store.Backend, reopen func(store.Backend) store.Backend)) {
	for _, kind := range backendKinds() {
		t.Run(kind.name, func(t *testing.T) {
			st, reopen := kind.open(t)
			test(t, st, reopen)
		})
	}
}

func openBadgerBackend(t testing.TB) (store.Backend, func(store.Backend) store.Backend) {
	dir := filepath.Join(t.TempDir(), "data")
	st := openStore(t, dir)
	closeAtCleanup(t, st)
	return st, func(old store.Backend) store.Backend {
		t.Helper()
		if err := old.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		st := openStore(t, dir)
		closeAtCleanup(t, st)
		return st
	}
}

func openMemBackend(t testing.TB) (store.Backend, func(store.Backend) store.Backend) {
	log := store.NewMemLog()
	open := func() store.Backend {
		t.Helper()
		st, err := store.OpenMem(context.Background(), log, store.MemOptions{LogOptions: store.LogOptions{WriterID: "test"}})
		if err != nil {
			t.Fatalf("open mem: %v", err)
		}
		closeAtCleanup(t, st)
		return st
	}
	return open(), func(old store.Backend) store.Backend {
		t.Helper()
		if err := old.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		return open()
	}
}

func closeAtCleanup(t testing.TB, st store.Backend) {
	t.Cleanup(func() {
		if err := st.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			t.Errorf("close: %v", err)
		}
	})
}

func mustUpdate(t testing.TB, st store.Backend, fn func(w *store.Writer) error) {
	t.Helper()
	if err := st.Update(fn); err != nil {
		t.Fatalf("update: %v", err)
	}
}

func mustLoad(t testing.TB, st store.Backend) *store.Snapshot {
	t.Helper()
	snapshot, err := st.Load()
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return snapshot
}

// partitionOf finds one partition's records in a snapshot.
func partitionOf(s *store.Snapshot, group, topic string, partition int32) store.PartitionRecord {
	for _, g := range s.Groups {
		if g.Group != group {
			continue
		}
		for _, p := range g.Partitions {
			if p.Topic == topic && p.Partition == partition {
				return p
			}
		}
	}
	return store.PartitionRecord{Topic: topic, Partition: partition}
}

func epochOf(t testing.TB, st store.Backend, group, topic string, partition int32) uint64 {
	t.Helper()
	return partitionOf(mustLoad(t, st), group, topic, partition).Epoch
}

// writeEverything writes one or more records of every kind and returns
// the snapshot Load must give back.
func writeEverything(t *testing.T, st store.Backend) *store.Snapshot {
	state := store.PartitionState{State: store.StateRevoking, Owner: "a", Target: "b", Epoch: 7, ExpiresAtMs: 1_700_000_000_123, RevokedAtMs: 1_700_000_000_001}
	offset := store.CommittedOffset{Offset: 42, Metadata: "meta", Epoch: 7}
	lease := store.Lease{Holder: "ops", ExpiresAtMs: 1_700_000_900_000}
	config := store.GroupConfig{Assignor: "sticky", Config: []byte(`{"max_moves_per_second":2}`)}
	memberA := store.Member{ID: "a", InstanceID: "svc-1", ClientID: "svc", Topics: []string{"orders", "pay"}, Assignor: "sticky", SessionTimeoutMs: 10_000,
		Credential: store.Credential{ID: "jti-1", Issuer: "capgate", Subject: "svc"}}
	memberB := store.Member{ID: "b", ClientID: "svc", TopicPattern: "^orders-.*", Assignor: "sticky", SessionTimeoutMs: 30_000}
	mustUpdate(t, st, func(w *store.Writer) error {
		return errors.Join(
			w.PutEpoch("g1", "orders", 10, 3),
			w.PutEpoch("g1", "orders", 2, 8),
			w.PutEpoch("g1", "orders", 2, 9),
			w.PutPartitionState("g1", "orders", 2, state),
			w.PutOffset("g1", "orders", 2, offset),
			w.PutLease("g1", "orders", 2, lease),
			w.PutEpoch("g0", "a", 0, 1),
			w.PutGroupConfig("g1", config),
			w.PutMember("g1", memberB),
			w.PutMember("g1", memberA),
			w.PutDenied("jti-2", 2000),
			w.PutDenied("jti-1", 1000),
			w.PutRevokedMember("g1", "z", 3000),
			w.PutQoS("q1", []byte(`{"log_level":"debug"}`), 4000),
			w.PutGateway("gw-b", 20),
			w.PutGateway("gw-a", 10),
			w.SaveSeq(77),
			w.PutMeta(store.MetaCoordinatorIncarnation, []byte{5}),
			w.PutKeyRing([]byte(`{"keys":["k1"]}`)),
		)
	})
	return &store.Snapshot{
		Layout:  1,
		Seq:     77,
		KeyRing: []byte(`{"keys":["k1"]}`),
		Meta:    map[string][]byte{store.MetaCoordinatorIncarnation: {5}},
		Groups: []store.GroupRecords{
			{Group: "g0", Partitions: []store.PartitionRecord{{Topic: "a", Partition: 0, Epoch: 1}}},
			{
				Group:   "g1",
				Config:  &config,
				Members: []store.Member{memberA, memberB},
				Partitions: []store.PartitionRecord{
					{Topic: "orders", Partition: 2, Epoch: 9, State: &state, Offset: &offset, Lease: &lease},
					{Topic: "orders", Partition: 10, Epoch: 3},
				},
			},
		},
		Denied:         []store.Denied{{JTI: "jti-1", Exp: 1000}, {JTI: "jti-2", Exp: 2000}},
		RevokedMembers: []store.RevokedMember{{Group: "g1", MemberID: "z", Until: 3000}},
		QoS:            []store.QoSOverride{{ID: "q1", Config: []byte(`{"log_level":"debug"}`), Until: 4000}},
		Gateways:       []store.Gateway{{ID: "gw-a", FirstSeenMs: 10}, {ID: "gw-b", FirstSeenMs: 20}},
	}
}

func TestEveryRecordSurvivesRestart(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, reopen func(store.Backend) store.Backend) {
		want := writeEverything(t, st)
		if got := mustLoad(t, st); !reflect.DeepEqual(got, want) {
			t.Fatalf("before restart:\n got %+v\nwant %+v", got, want)
		}
		st = reopen(st)
		if got := mustLoad(t, st); !reflect.DeepEqual(got, want) {
			t.Fatalf("after restart:\n got %+v\nwant %+v", got, want)
		}
	})
}

func TestDeletesSurviveRestart(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, reopen func(store.Backend) store.Backend) {
		writeEverything(t, st)
		mustUpdate(t, st, func(w *store.Writer) error {
			return errors.Join(
				w.DeletePartitionState("g1", "orders", 2),
				w.DeleteOffset("g1", "orders", 2),
				w.DeleteLease("g1", "orders", 2),
				w.DeleteGroupConfig("g1"),
				w.DeleteMember("g1", "a"),
				w.DeleteMember("g1", "b"),
				w.DeleteDenied("jti-1"),
				w.DeleteDenied("jti-2"),
				w.DeleteRevokedMember("g1", "z"),
				w.DeleteQoS("q1"),
				w.DeleteGateway("gw-a"),
				w.DeleteGateway("gw-b"),
				w.DeleteMeta(store.MetaCoordinatorIncarnation),
			)
		})
		st = reopen(st)
		want := &store.Snapshot{
			Layout:  1,
			Seq:     77,
			KeyRing: []byte(`{"keys":["k1"]}`),
			Meta:    map[string][]byte{},
			Groups: []store.GroupRecords{ // epochs are never deleted
				{Group: "g0", Partitions: []store.PartitionRecord{{Topic: "a", Partition: 0, Epoch: 1}}},
				{Group: "g1", Partitions: []store.PartitionRecord{{Topic: "orders", Partition: 2, Epoch: 9}, {Topic: "orders", Partition: 10, Epoch: 3}}},
			},
		}
		if got := mustLoad(t, st); !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v\nwant %+v", got, want)
		}
	})
}

func TestEmptyStoreLoads(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, reopen func(store.Backend) store.Backend) {
		want := &store.Snapshot{Layout: 1, Meta: map[string][]byte{}}
		if got := mustLoad(t, st); !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v", got)
		}
		if got := mustLoad(t, reopen(st)); !reflect.DeepEqual(got, want) {
			t.Fatalf("after restart: got %+v", got)
		}
	})
}

func TestClosedStoreRefusesEverything(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, _ func(store.Backend) store.Backend) {
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		checks := map[string]error{
			"Update": st.Update(func(*store.Writer) error { return nil }),
			"Close":  st.Close(),
		}
		_, checks["Load"] = st.Load()
		for name, err := range checks {
			if !errors.Is(err, store.ErrClosed) {
				t.Errorf("%s after Close: %v, want ErrClosed", name, err)
			}
		}
	})
}

func TestEpochRegressionRefusesWholeBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, _ func(store.Backend) store.Backend) {
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
		// The refused batch left the backend writable.
		mustUpdate(t, st, func(w *store.Writer) error { return w.PutEpoch("g", "t", 3, 8) })
	})
}

func TestEpochRegressionWithinOneBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, _ func(store.Backend) store.Backend) {
		err := st.Update(func(w *store.Writer) error {
			w.PutEpoch("g", "t", 0, 5)
			return w.PutEpoch("g", "t", 0, 4)
		})
		if !errors.Is(err, store.ErrEpochRegression) {
			t.Fatalf("err = %v, want ErrEpochRegression", err)
		}
		if epoch := epochOf(t, st, "g", "t", 0); epoch != 0 {
			t.Fatalf("epoch %d stored from a failed batch", epoch)
		}
	})
}

func TestEqualEpochIsNoop(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, _ func(store.Backend) store.Backend) {
		for range 2 {
			mustUpdate(t, st, func(w *store.Writer) error { return w.PutEpoch("g", "t", 0, 5) })
		}
		if epoch := epochOf(t, st, "g", "t", 0); epoch != 5 {
			t.Fatalf("epoch %d, want 5", epoch)
		}
	})
}

// A Writer error the caller ignores still fails the batch.
func TestIgnoredWriterErrorFailsBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, _ func(store.Backend) store.Backend) {
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
	})
}

func TestCallbackErrorDiscardsBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, _ func(store.Backend) store.Backend) {
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
		if epoch := epochOf(t, st, "g", "t", 0); epoch != 0 {
			t.Fatalf("epoch %d written by a failed batch", epoch)
		}
	})
}

func TestWriterUnusableAfterUpdate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, _ func(store.Backend) store.Backend) {
		var kept *store.Writer
		mustUpdate(t, st, func(w *store.Writer) error { kept = w; return nil })
		if err := kept.PutEpoch("g", "t", 0, 1); err == nil {
			t.Fatal("a Writer kept after its Update still writes")
		}
	})
}

func TestOffsetRegression(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, reopen func(store.Backend) store.Backend) {
		offsetOf := func() store.CommittedOffset {
			t.Helper()
			p := partitionOf(mustLoad(t, st), "g", "t", 0)
			if p.Offset == nil {
				t.Fatal("no offset stored")
			}
			return *p.Offset
		}
		mustUpdate(t, st, func(w *store.Writer) error {
			return w.PutOffset("g", "t", 0, store.CommittedOffset{Offset: 100, Epoch: 1})
		})
		st = reopen(st) // the check reads what a restart loaded
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
		if got := offsetOf(); got != same {
			t.Fatalf("offset %+v, want %+v", got, same)
		}
		// An admin reset may go back.
		reset := store.CommittedOffset{Offset: 10, Metadata: "reset", Epoch: 2}
		mustUpdate(t, st, func(w *store.Writer) error { return w.ResetOffset("g", "t", 0, reset) })
		if got := offsetOf(); got != reset {
			t.Fatalf("offset %+v after reset, want %+v", got, reset)
		}
	})
}

func TestSeqNeverGoesDown(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, reopen func(store.Backend) store.Backend) {
		mustUpdate(t, st, func(w *store.Writer) error { return w.SaveSeq(10) })
		mustUpdate(t, st, func(w *store.Writer) error { return w.SaveSeq(10) })
		st = reopen(st)
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
	})
}

func TestGatewayKeepsEarliestFirstSeen(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, _ func(store.Backend) store.Backend) {
		for _, ms := range []int64{50, 70, 30} {
			mustUpdate(t, st, func(w *store.Writer) error { return w.PutGateway("gw", ms) })
		}
		if got := mustLoad(t, st).Gateways; !reflect.DeepEqual(got, []store.Gateway{{ID: "gw", FirstSeenMs: 30}}) {
			t.Fatalf("gateways %+v", got)
		}
	})
}

func TestInvalidRecordsAreRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, _ func(store.Backend) store.Backend) {
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
		if got := mustLoad(t, st); len(got.Groups)+len(got.Denied)+len(got.QoS) != 0 || got.KeyRing != nil {
			t.Fatalf("refused records stored: %+v", got)
		}
	})
}

// Names with separators and NUL bytes round-trip and stay distinct.
func TestOddNamesRoundTrip(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, reopen func(store.Backend) store.Backend) {
		groups := []string{"a/b", "a", "a\x00", "ü", "a\x00b"}
		mustUpdate(t, st, func(w *store.Writer) error {
			for i, g := range groups {
				w.PutEpoch(g, "t/x", int32(i), uint64(i+1))
			}
			return nil
		})
		st = reopen(st)
		for i, g := range groups {
			if epoch := epochOf(t, st, g, "t/x", int32(i)); epoch != uint64(i+1) {
				t.Errorf("epoch of %q = %d; want %d", g, epoch, i+1)
			}
		}
		if got := len(mustLoad(t, st).Groups); got != len(groups) {
			t.Fatalf("%d groups loaded, want %d", got, len(groups))
		}
	})
}

// Several goroutines raise epochs of one shared partition and write their
// own; run with -race. The shared epoch must end at the maximum, no write
// may be lost, and regressions must be refused rather than applied.
func TestConcurrentUpdates(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, _ func(store.Backend) store.Backend) {
		const writers, rounds = 4, 15
		var wg sync.WaitGroup
		errs := make(chan error, writers*rounds*2)
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
		if epoch := epochOf(t, st, "g", "shared", 0); epoch != writers*rounds {
			t.Fatalf("shared epoch %d, want %d", epoch, writers*rounds)
		}
	})
}

// 10,000 partitions' epoch and state (20,000 records) commit in one batch.
func TestLargeBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, reopen func(store.Backend) store.Backend) {
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
		st = reopen(st)
		groups := mustLoad(t, st).Groups
		if len(groups) != 1 || len(groups[0].Partitions) != partitions {
			t.Fatalf("loaded %d groups", len(groups))
		}
		for i, record := range groups[0].Partitions {
			if record.Partition != int32(i) || record.Epoch != 1 || record.State == nil {
				t.Fatalf("partition %d: %+v", i, record)
			}
		}
	})
}

// The batch bounds are the same on every backend: one record or one byte
// beyond them fails the whole batch with ErrBatchTooBig, nothing written,
// and the backend stays writable.
func TestBatchBounds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, _ func(store.Backend) store.Backend) {
		tooMany := st.Update(func(w *store.Writer) error {
			for i := range store.MaxBatchRecords + 1 {
				if err := w.PutDenied(fmt.Sprint(i), 1); err != nil {
					return err
				}
			}
			return nil
		})
		if !errors.Is(tooMany, store.ErrBatchTooBig) {
			t.Fatalf("%d records: err = %v, want ErrBatchTooBig", store.MaxBatchRecords+1, tooMany)
		}
		big := make([]byte, 64<<10)
		tooLarge := st.Update(func(w *store.Writer) error {
			for i := range store.MaxBatchBytes/len(big) + 1 {
				if err := w.PutMeta(fmt.Sprint("big-", i), big); err != nil {
					return err
				}
			}
			return nil
		})
		if !errors.Is(tooLarge, store.ErrBatchTooBig) {
			t.Fatalf("%d bytes: err = %v, want ErrBatchTooBig", store.MaxBatchBytes, tooLarge)
		}
		if got := mustLoad(t, st); len(got.Denied) != 0 || len(got.Meta) != 0 {
			t.Fatalf("a refused batch wrote %d denied ids, %d meta values", len(got.Denied), len(got.Meta))
		}
		mustUpdate(t, st, func(w *store.Writer) error { return w.PutDenied("after", 1) })
	})
}

// Forgetting a partition deletes its epoch and state but raises the epoch
// floor to its epoch, durably: the partition (or any new one) then takes
// only epochs above every epoch ever forgotten.
func TestForgottenEpochsAreNeverReissued(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, reopen func(store.Backend) store.Backend) {
		mustUpdate(t, st, func(w *store.Writer) error {
			return errors.Join(w.PutEpoch("g", "t", 0, 7), w.PutEpoch("g", "t", 1, 3),
				w.PutPartitionState("g", "t", 0, store.PartitionState{State: store.StateUnowned}))
		})
		mustUpdate(t, st, func(w *store.Writer) error {
			return errors.Join(w.ForgetPartition("g", "t", 0), w.ForgetPartition("g", "t", 1))
		})
		st = reopen(st)
		snap := mustLoad(t, st)
		if snap.EpochFloor != 7 || len(snap.Groups) != 0 {
			t.Fatalf("after forgetting: floor %d, groups %+v", snap.EpochFloor, snap.Groups)
		}
		for _, epoch := range []uint64{1, 6} {
			if err := st.Update(func(w *store.Writer) error { return w.PutEpoch("g", "t", 0, epoch) }); !errors.Is(err, store.ErrEpochRegression) {
				t.Fatalf("epoch %d of a forgotten partition: %v, want ErrEpochRegression", epoch, err)
			}
			if err := st.Update(func(w *store.Writer) error { return w.PutEpoch("h", "u", 0, epoch) }); !errors.Is(err, store.ErrEpochRegression) {
				t.Fatalf("epoch %d of a new partition: %v, want ErrEpochRegression", epoch, err)
			}
		}
		mustUpdate(t, st, func(w *store.Writer) error {
			return errors.Join(w.PutEpoch("g", "t", 0, 8), w.PutEpoch("h", "u", 0, 7))
		})
		if err := st.Update(func(w *store.Writer) error { return w.PutMeta(store.MetaEpochFloor, []byte{1}) }); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("the floor written as meta: %v", err)
		}
	})
}

// TestLayoutIsRaisedWithItsRecords: a new store is at layout 1, and
// RaiseLayout raises it in the batch that writes the records an older
// build would misread — never lowers it, refuses a layout this build does
// not know with nothing of its batch written, and a restart reads the
// raised store (the migration of keys.go's layout 2).
func TestLayoutIsRaisedWithItsRecords(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, reopen func(store.Backend) store.Backend) {
		if got := mustLoad(t, st).Layout; got != 1 {
			t.Fatalf("a new store has layout %d, want 1", got)
		}
		mustUpdate(t, st, func(w *store.Writer) error {
			return errors.Join(w.RaiseLayout(store.LayoutBulkBlocks), w.PutMeta("block", []byte{1}))
		})
		mustUpdate(t, st, func(w *store.Writer) error { return w.RaiseLayout(1) })
		err := st.Update(func(w *store.Writer) error {
			return errors.Join(w.PutMeta("other", []byte{2}), w.RaiseLayout(store.LayoutBulkBlocks+1))
		})
		if !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("raising to an unknown layout: %v, want ErrInvalid", err)
		}
		st = reopen(st)
		got := mustLoad(t, st)
		if got.Layout != store.LayoutBulkBlocks {
			t.Fatalf("after restart the layout is %d, want %d", got.Layout, store.LayoutBulkBlocks)
		}
		if _, ok := got.Meta["other"]; ok || got.Meta["block"] == nil {
			t.Fatalf("meta after restart %v: want block alone", got.Meta)
		}
	})
}

// TestCheckEpochKeepsPutEpochsRules: CheckEpoch refuses what PutEpoch
// refuses (below the stored epoch, a new partition below the floor),
// returns the stored epoch and writes nothing.
func TestCheckEpochKeepsPutEpochsRules(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, reopen func(store.Backend) store.Backend) {
		mustUpdate(t, st, func(w *store.Writer) error {
			return errors.Join(w.PutEpoch("g", "t", 0, 5), w.PutEpoch("g", "t", 1, 9), w.ForgetPartition("g", "t", 1))
		})
		var stored, fresh uint64
		mustUpdate(t, st, func(w *store.Writer) error {
			var err1, err2 error
			stored, err1 = w.CheckEpoch("g", "t", 0, 7)
			fresh, err2 = w.CheckEpoch("g", "t", 2, 10)
			return errors.Join(err1, err2)
		})
		if stored != 5 || fresh != 0 {
			t.Fatalf("CheckEpoch returned %d and %d, want 5 and 0", stored, fresh)
		}
		if got := epochOf(t, st, "g", "t", 0); got != 5 {
			t.Fatalf("epoch after CheckEpoch %d, want 5 (nothing written)", got)
		}
		for _, c := range []struct {
			partition int32
			epoch     uint64
		}{{0, 4}, {2, 8}} {
			err := st.Update(func(w *store.Writer) error {
				_, err := w.CheckEpoch("g", "t", c.partition, c.epoch)
				return err
			})
			if !errors.Is(err, store.ErrEpochRegression) {
				t.Errorf("CheckEpoch of partition %d at %d: %v, want ErrEpochRegression", c.partition, c.epoch, err)
			}
		}
		// The floor a batch raised applies later in that batch: partition
		// 0 (at 5) raised to 30 and forgotten, then a new partition at 20.
		err := st.Update(func(w *store.Writer) error {
			_, err := w.CheckEpoch("g", "t", 3, 10) // reads the floor (9) first
			return errors.Join(err, w.PutEpoch("g", "t", 0, 30), w.ForgetPartition("g", "t", 0), w.PutEpoch("g", "t", 4, 20))
		})
		if !errors.Is(err, store.ErrEpochRegression) {
			t.Errorf("a new partition at 20 after the batch raised the floor to 30: %v, want ErrEpochRegression", err)
		}
	})
}

// TestForgetPartitionAtRaisesTheFloorToACallersEpoch (review27): a
// partition whose newest epoch the caller keeps outside its own key (the
// coordinator's bulk blocks) is forgotten with that epoch: the floor
// rises to it when it is above the floor and the own key's, a floor
// already above it is no error (it covers it; a PutEpoch of it first
// was refused there), and the own key's epoch counts when higher.
func TestForgetPartitionAtRaisesTheFloorToACallersEpoch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, st store.Backend, reopen func(store.Backend) store.Backend) {
		mustUpdate(t, st, func(w *store.Writer) error {
			return errors.Join(w.PutEpoch("g", "t", 0, 9), w.ForgetPartition("g", "t", 0))
		})
		mustUpdate(t, st, func(w *store.Writer) error { return w.ForgetPartitionAt("g", "t", 1, 4) })
		if floor := mustLoad(t, st).EpochFloor; floor != 9 {
			t.Fatalf("floor %d after forgetting an epoch below it, want 9", floor)
		}
		mustUpdate(t, st, func(w *store.Writer) error {
			return errors.Join(w.PutEpoch("g", "t", 2, 12), w.ForgetPartitionAt("g", "t", 2, 10), w.ForgetPartitionAt("g", "t", 3, 11))
		})
		st = reopen(st)
		if floor := mustLoad(t, st).EpochFloor; floor != 12 {
			t.Fatalf("floor %d, want the own key's 12", floor)
		}
		mustUpdate(t, st, func(w *store.Writer) error { return w.ForgetPartitionAt("g", "t", 4, 15) })
		if floor := mustLoad(t, st).EpochFloor; floor != 15 {
			t.Fatalf("floor %d, want the caller's 15", floor)
		}
		if err := st.Update(func(w *store.Writer) error { return w.PutEpoch("h", "u", 0, 14) }); !errors.Is(err, store.ErrEpochRegression) {
			t.Fatalf("a new partition at 14 under the floor 15: %v, want ErrEpochRegression", err)
		}
	})
}
