package coordinator

import (
	"errors"
	"strings"
	"testing"

	"github.com/capgate/capgate/store"
)

// TestPublicLoopErrorNamesNoTenantForAnyRefusedWrite (review24): every
// error of a store Writer names the record it was on — "store: save
// offset secret-group/orders/0: …" — not only a regression or a corrupt
// record. A batch too big for one transaction, or a record the store
// found invalid, failed the loop closed with that text, and /readyz,
// which answers anyone, said it whole: the tenant's group and topic.
// The errors here are a real store's.
func TestPublicLoopErrorNamesNoTenantForAnyRefusedWrite(t *testing.T) {
	st, err := store.Open("", store.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	invalid := st.Update(func(w *store.Writer) error {
		return w.PutOffset("secret-group", "orders", 0, store.CommittedOffset{Offset: -5})
	})
	tooBig := st.Update(func(w *store.Writer) error {
		for i := 0; ; i++ {
			if err := w.PutEpoch("secret-group", "orders", int32(i), 1); err != nil {
				return err
			}
		}
	})
	for _, c := range []struct {
		err      error
		sentinel error
	}{{invalid, store.ErrInvalid}, {tooBig, store.ErrBatchTooBig}} {
		if !errors.Is(c.err, c.sentinel) || !strings.Contains(c.err.Error(), "secret-group") {
			t.Fatalf("the store's error %v: want %v naming the group (the premise)", c.err, c.sentinel)
		}
		got := publicLoopError(c.err)
		if strings.Contains(got.Error(), "secret-group") || !strings.Contains(got.Error(), "store refused a write") || !errors.Is(got, c.sentinel) {
			t.Errorf("publicLoopError(%q) = %q (errors.Is %v): want it to say the store refused a write, name no group, the cause still wrapped",
				c.err, got, errors.Is(got, c.sentinel))
		}
	}
}
