package store

import (
	"errors"
	"path/filepath"
	"testing"
)

// The regression check of a partition the store wrote reads its stored
// epoch from the cache (Store.epochs), not from badger — a revoke of a
// member holding 10,000 partitions read 10,000 epochs through every
// memtable and level — and the cache answers what badger would: a
// regression is refused, a forgotten partition is gone (the epoch floor
// applies), a refused batch teaches it nothing.
func TestEpochReadsComeFromTheCache(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "store"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	raise := func(epoch uint64, n int32) error {
		return st.Update(func(w *Writer) error {
			for p := range n {
				if err := w.PutEpoch("g", "t", p, epoch); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := raise(5, 100); err != nil {
		t.Fatal(err)
	}
	st.epochMisses = 0
	if err := raise(6, 100); err != nil {
		t.Fatal(err)
	}
	if st.epochMisses != 0 {
		t.Fatalf("%d of 100 epoch reads went to badger after the store wrote them", st.epochMisses)
	}
	if err := raise(4, 1); !errors.Is(err, ErrEpochRegression) {
		t.Fatalf("epoch 4 over a stored 6: %v, want a regression", err)
	}
	// A refused batch: its epoch 9 never reached the disk, nor the cache.
	err = st.Update(func(w *Writer) error {
		if err := w.PutEpoch("g", "t", 0, 9); err != nil {
			return err
		}
		return errors.New("refused")
	})
	if err == nil {
		t.Fatal("refused batch committed")
	}
	if err := raise(7, 1); err != nil {
		t.Fatalf("epoch 7 after a refused 9: %v", err)
	}
	// Forgetting raises the epoch floor to the partition's epoch: partition
	// 2 at 20 forgotten, then partition 1 at 6. A new epoch of partition 1
	// is now checked against the floor (20), not its old stored 6.
	if err := st.Update(func(w *Writer) error { return w.PutEpoch("g", "t", 2, 20) }); err != nil {
		t.Fatal(err)
	}
	err = st.Update(func(w *Writer) error {
		return errors.Join(w.ForgetPartition("g", "t", 2), w.ForgetPartition("g", "t", 1))
	})
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(func(w *Writer) error { return w.PutEpoch("g", "t", 1, 10) })
	if !errors.Is(err, ErrEpochRegression) {
		t.Fatalf("epoch 10 of a forgotten partition under the floor 20: %v, want a regression", err)
	}
	if err := st.Update(func(w *Writer) error { return w.PutEpoch("g", "t", 1, 21) }); err != nil {
		t.Fatalf("epoch 21 of a forgotten partition over the floor: %v", err)
	}
	if got, err := st.Epoch("g", "t", 1); err != nil || got != 21 {
		t.Fatalf("stored epoch %d, %v; want 21", got, err)
	}
}

// TestAbsentEpochsAreCached: an epoch key badger does not hold is read
// from badger once, then answered absent by the cache (a bulk write of
// partitions whose epochs live in the coordinator's bulk blocks reads
// 10,000 absent keys), and the cache answers what badger would once the
// key is written: the written epoch, so a regression is still refused —
// never "absent", which would let any epoch above the floor through.
func TestAbsentEpochsAreCached(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "store"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	check := func() error {
		return st.Update(func(w *Writer) error {
			for p := range int32(100) {
				if _, err := w.CheckEpoch("g", "t", p, 3); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := check(); err != nil {
		t.Fatal(err)
	}
	st.epochMisses = 0
	if err := check(); err != nil {
		t.Fatal(err)
	}
	if st.epochMisses != 0 {
		t.Fatalf("%d of 100 reads of absent epochs went to badger a second time", st.epochMisses)
	}
	if err := st.Update(func(w *Writer) error { return w.PutEpoch("g", "t", 7, 5) }); err != nil {
		t.Fatal(err)
	}
	err = st.Update(func(w *Writer) error { return w.PutEpoch("g", "t", 7, 4) })
	if !errors.Is(err, ErrEpochRegression) {
		t.Fatalf("epoch 4 over a stored 5 (cached absent before): %v, want a regression", err)
	}
}
