package store_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/capgate/capgate/store"
)

func openStore(t testing.TB, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return st
}

// openTemp opens a store in a fresh directory and closes it at cleanup
// (unless the test closed it already).
func openTemp(t testing.TB) (*store.Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	st := openStore(t, dir)
	t.Cleanup(func() {
		if err := st.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			t.Errorf("close: %v", err)
		}
	})
	return st, dir
}

func mustUpdate(t testing.TB, st *store.Store, fn func(w *store.Writer) error) {
	t.Helper()
	if err := st.Update(fn); err != nil {
		t.Fatalf("update: %v", err)
	}
}

func mustLoad(t testing.TB, st *store.Store) *store.Snapshot {
	t.Helper()
	snapshot, err := st.Load()
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return snapshot
}

func reopen(t *testing.T, st *store.Store, dir string) *store.Store {
	t.Helper()
	if err := st.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	reopened := openStore(t, dir)
	t.Cleanup(func() { reopened.Close() })
	return reopened
}

// writeEverything writes one or more records of every kind and returns
// the snapshot Load must give back.
func writeEverything(t *testing.T, st *store.Store) *store.Snapshot {
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
	st, dir := openTemp(t)
	want := writeEverything(t, st)
	if got := mustLoad(t, st); !reflect.DeepEqual(got, want) {
		t.Fatalf("before restart:\n got %+v\nwant %+v", got, want)
	}
	st = reopen(t, st, dir)
	if got := mustLoad(t, st); !reflect.DeepEqual(got, want) {
		t.Fatalf("after restart:\n got %+v\nwant %+v", got, want)
	}
	epoch, err := st.Epoch("g1", "orders", 2)
	if err != nil || epoch != 9 {
		t.Fatalf("Epoch = %d, %v; want 9", epoch, err)
	}
	offset, found, err := st.Offset("g1", "orders", 2)
	if err != nil || !found || offset != (store.CommittedOffset{Offset: 42, Metadata: "meta", Epoch: 7}) {
		t.Fatalf("Offset = %+v, %v, %v", offset, found, err)
	}
	offsets, err := st.Offsets("g1")
	if err != nil || len(offsets) != 1 || offsets[0].Topic != "orders" || offsets[0].Partition != 2 || offsets[0].Offset != 42 {
		t.Fatalf("Offsets = %+v, %v", offsets, err)
	}
}

func TestDeletesSurviveRestart(t *testing.T) {
	st, dir := openTemp(t)
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
	st = reopen(t, st, dir)
	want := &store.Snapshot{
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
}

func TestEmptyStoreLoads(t *testing.T) {
	st, _ := openTemp(t)
	want := &store.Snapshot{Meta: map[string][]byte{}}
	if got := mustLoad(t, st); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
	if epoch, err := st.Epoch("g", "t", 0); err != nil || epoch != 0 {
		t.Fatalf("Epoch = %d, %v", epoch, err)
	}
	if _, found, err := st.Offset("g", "t", 0); err != nil || found {
		t.Fatalf("Offset found=%v, %v", found, err)
	}
}

func TestDataDirectoryIsPrivate(t *testing.T) {
	st, dir := openTemp(t)
	checkPrivate(t, dir, "after open")
	writeEverything(t, st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	checkPrivate(t, dir, "after close")

	// A directory made too open by someone else is tightened on open.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	st = openStore(t, dir)
	defer st.Close()
	checkPrivate(t, dir, "after reopen")
}

func checkPrivate(t *testing.T, dir, when string) {
	t.Helper()
	files := 0
	err := filepath.WalkDir(dir, func(path string, entry fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := entry.Info()
		if err != nil {
			return err
		}
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s: %s has mode %v, readable by group or others", when, path, perm)
		}
		if entry.Type().IsRegular() {
			files++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("%s: directory mode %v, %v; want 0700", when, info.Mode().Perm(), err)
	}
	if files == 0 {
		t.Fatalf("%s: no files in %s", when, dir)
	}
}

func TestClosedStoreRefusesEverything(t *testing.T) {
	st, _ := openTemp(t)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	checks := map[string]error{
		"Update": st.Update(func(*store.Writer) error { return nil }),
		"Close":  st.Close(),
	}
	_, checks["Load"] = st.Load()
	_, checks["Epoch"] = st.Epoch("g", "t", 0)
	_, _, checks["Offset"] = st.Offset("g", "t", 0)
	_, checks["Offsets"] = st.Offsets("g")
	_, checks["PruneDenied"] = st.PruneDenied(0)
	for name, err := range checks {
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func TestLayoutFromTheFutureIsRefused(t *testing.T) {
	st, dir := openTemp(t)
	if err := st.PutRaw(store.LayoutKey(), []byte{store.FormatVersion, 2}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := store.Open(dir, store.Options{})
	if err == nil {
		reopened.Close()
		t.Fatal("opened a store with key layout 2")
	}
	if !strings.Contains(err.Error(), "layout version 2") {
		t.Fatalf("error %q does not name the layout", err)
	}
}

func TestInMemory(t *testing.T) {
	st, err := store.Open("", store.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mustUpdate(t, st, func(w *store.Writer) error { return w.PutEpoch("g", "t", 0, 1) })
	if epoch, err := st.Epoch("g", "t", 0); err != nil || epoch != 1 {
		t.Fatalf("Epoch = %d, %v", epoch, err)
	}
}
