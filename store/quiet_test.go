package store_test

import (
	"path/filepath"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/store"
)

// A normal open, write, close and reopen logs nothing: badger's info
// chatter is dropped, only its warnings and errors reach zap.
func TestBadgerIsQuiet(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	dir := filepath.Join(t.TempDir(), "data")
	for range 2 {
		st, err := store.Open(dir, store.Options{Logger: zap.New(core)})
		if err != nil {
			t.Fatal(err)
		}
		mustUpdate(t, st, func(w *store.Writer) error { return w.PutEpoch("g", "t", 0, 1) })
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, entry := range logs.All() {
		t.Errorf("logged %s: %s", entry.Level, entry.Message)
	}
}
