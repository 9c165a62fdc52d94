package store_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/capgate/capgate/store"
)

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
