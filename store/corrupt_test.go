package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/capgate/capgate/store"
)

// A corrupt value or key gives ErrCorrupt naming the key, from every read
// path, and never a panic.
func TestCorruptRecordsNameTheirKey(t *testing.T) {
	v := store.FormatVersion
	member := store.MemberKey("g", "m1")
	for _, c := range []struct {
		name, key string
		raw       []byte
		value     []byte
	}{
		{"empty epoch", "e/g/t/1", store.EpochKey("g", "t", 1), nil},
		{"epoch version", "e/g/t/1", store.EpochKey("g", "t", 1), []byte{v + 1, 7}},
		{"epoch trailing", "e/g/t/1", store.EpochKey("g", "t", 1), []byte{v, 7, 7}},
		{"epoch overflow", "e/g/t/1", store.EpochKey("g", "t", 1), []byte{v, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}},
		{"state truncated", "s/g/t/1", store.StateKey("g", "t", 1), []byte{v, 5, 'o', 'w'}},
		{"state unknown", "s/g/t/1", store.StateKey("g", "t", 1), []byte{v, 1, 'x', 0, 0, 0, 0, 0}},
		{"offset huge string", "o/g/t/1", store.OffsetKey("g", "t", 1), []byte{v, 2, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F}},
		{"member id mismatch", "m/g/m1", member, []byte{v, 2, 'm', '2', 0, 0, 0, 0, 0, 0}},
		{"unknown prefix", `"zz/1"`, []byte("zz/1"), []byte{v}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, _ := openTemp(t)
			if err := st.PutRaw(c.raw, c.value); err != nil {
				t.Fatal(err)
			}
			_, err := st.Load()
			checkCorrupt(t, "Load", err, c.key)
			switch c.key {
			case "e/g/t/1":
				_, err = st.Epoch("g", "t", 1)
				checkCorrupt(t, "Epoch", err, c.key)
				err = st.Update(func(w *store.Writer) error { return w.PutEpoch("g", "t", 1, 9) })
				checkCorrupt(t, "PutEpoch", err, c.key)
			case "o/g/t/1":
				_, _, err = st.Offset("g", "t", 1)
				checkCorrupt(t, "Offset", err, c.key)
				_, err = st.Offsets("g")
				checkCorrupt(t, "Offsets", err, c.key)
				err = st.Update(func(w *store.Writer) error {
					return w.PutOffset("g", "t", 1, store.CommittedOffset{Offset: 1})
				})
				checkCorrupt(t, "PutOffset", err, c.key)
			}
		})
	}
}

func checkCorrupt(t *testing.T, op string, err error, key string) {
	t.Helper()
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("%s: err = %v, want ErrCorrupt", op, err)
	}
	if !strings.Contains(err.Error(), "key "+key+":") {
		t.Fatalf("%s: error %q does not name key %s", op, err, key)
	}
}
