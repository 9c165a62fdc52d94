package store_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/capgate/capgate/store"
)

// A mark taken before a takeover cannot be confirmed by the deposed
// writer, even though it has written nothing since and so does not know
// yet; a mark of the live writer confirms, with one empty transaction
// shared by concurrent Confirms, or none when a write began after it; a
// write in flight when the mark was taken does not count.
func TestConfirmRestsOnFencing(t *testing.T) {
	forEachLog(t, func(t *testing.T, env logEnv) {
		old := env.mustOpen(t, "old")
		putEpochs(t, old, 0, 1, 1)
		if err := old.Mark().Confirm(); err != nil {
			t.Fatalf("live writer: %v", err)
		}
		// A write after the mark confirms it without another transaction.
		mark := old.Mark()
		putEpochs(t, old, 0, 1, 2)
		if err := mark.Confirm(); err != nil {
			t.Fatalf("after an update: %v", err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			m := old.Mark()
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = m.Confirm() }()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("concurrent confirm %d: %v", i, err)
			}
		}

		stale := old.Mark()
		taker := env.mustOpen(t, "new")
		if err := stale.Confirm(); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("deposed writer confirmed a mark: %v, want ErrFenced", err)
		}
		if !old.Fenced() {
			t.Fatal("a fenced confirm must fail the writer for good")
		}
		if err := taker.Mark().Confirm(); err != nil {
			t.Fatalf("new writer: %v", err)
		}
		if got := epochOf(t, taker, "g", "t", 0); got != 2 {
			t.Fatalf("new writer reads epoch %d, want 2", got)
		}
	})
}
