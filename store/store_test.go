package store_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// Point reads (badger only; the coordinator reads through Load).
func TestPointReads(t *testing.T) {
	st, dir := openTemp(t)
	writeEverything(t, st)
	st = reopen(t, st, dir)
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
	if epoch, err := st.Epoch("g", "t", 0); err != nil || epoch != 0 {
		t.Fatalf("Epoch of nothing = %d, %v", epoch, err)
	}
	if _, found, err := st.Offset("g", "t", 0); err != nil || found {
		t.Fatalf("Offset of nothing found=%v, %v", found, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	_, errEpoch := st.Epoch("g", "t", 0)
	_, _, errOffset := st.Offset("g", "t", 0)
	_, errOffsets := st.Offsets("g")
	_, errPrune := st.PruneDenied(0)
	for _, err := range []error{errEpoch, errOffset, errOffsets, errPrune} {
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("after Close: %v, want ErrClosed", err)
		}
	}
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

// TestDataFilesArePrivateWhileRunning is the attack of issue #10: the
// files badger created while the store ran (new memtables, tables) were
// 0644 until the next close, readable by any local user, although the
// signing keys live in them. Writing past a memtable makes badger create
// files while open; every one must be 0600 at once.
func TestDataFilesArePrivateWhileRunning(t *testing.T) {
	st, dir := openTemp(t)
	before := map[string]bool{}
	filepath.WalkDir(dir, func(path string, _ fs.DirEntry, _ error) error { before[path] = true; return nil })
	value := make([]byte, 1<<20)
	for i := 0; ; i++ {
		if err := st.PutRaw([]byte(fmt.Sprintf("fill-%06d", i)), value); err != nil {
			t.Fatal(err)
		}
		created := 0
		filepath.WalkDir(dir, func(path string, _ fs.DirEntry, _ error) error {
			if !before[path] {
				created++
			}
			return nil
		})
		if created > 0 && i > 40 {
			break
		}
		if i > 200 {
			t.Fatal("badger created no file after 200 MiB of writes")
		}
	}
	checkPrivate(t, dir, "while running")
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

func TestLayoutFromTheFutureIsRefused(t *testing.T) {
	st, dir := openTemp(t)
	if err := st.PutRaw(store.LayoutKey(), []byte{store.FormatVersion, 3}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := store.Open(dir, store.Options{})
	if err == nil {
		reopened.Close()
		t.Fatal("opened a store with key layout 3")
	}
	if !strings.Contains(err.Error(), "layout version 3") {
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
