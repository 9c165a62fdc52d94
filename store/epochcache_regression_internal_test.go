package store

import (
	"errors"
	"path/filepath"
	"testing"
)

// TestEpochCacheNeverAnswersBelowTheDisk: the epoch cache (Store.epochs)
// stands in for badger in PutEpoch's regression check, so a cached epoch
// below the stored one would let a lower epoch overwrite a higher — a
// fence lowered, a capability of an old epoch granted again. Raised 5, 6,
// 7 in three batches (each read answered by the cache after the first),
// a write of 6 must be refused and 7 stay. TestEpochReadsComeFromTheCache
// checks the cache is used; this checks what it answers after several
// raises: a cache not learning a batch's writes once committed (toggled)
// still answered 5 and let 6 overwrite 7.
func TestEpochCacheNeverAnswersBelowTheDisk(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "store"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	put := func(epoch uint64) error {
		return st.Update(func(w *Writer) error { return w.PutEpoch("g", "t", 0, epoch) })
	}
	for _, e := range []uint64{5, 6, 7} {
		if err := put(e); err != nil {
			t.Fatalf("raise to %d: %v", e, err)
		}
	}
	if err := put(6); !errors.Is(err, ErrEpochRegression) {
		t.Fatalf("epoch 6 over a stored 7: %v, want a regression", err)
	}
	if got, err := st.Epoch("g", "t", 0); err != nil || got != 7 {
		t.Fatalf("stored epoch %d, %v; want 7", got, err)
	}
}
