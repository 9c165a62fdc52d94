package store_test

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/store"
)

func TestParseKEK(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	for _, text := range []string{
		base64.StdEncoding.EncodeToString(key), base64.RawURLEncoding.EncodeToString(key),
		hex.EncodeToString(key), "  " + base64.StdEncoding.EncodeToString(key) + "\n",
	} {
		kek, err := store.ParseKEK(text)
		if err != nil {
			t.Fatalf("ParseKEK(%q): %v", text, err)
		}
		if want, _ := store.NewKEK(key); kek.ID() != want.ID() {
			t.Fatalf("ParseKEK(%q) id %s, want %s", text, kek.ID(), want.ID())
		}
	}
	for _, text := range []string{"", "short", base64.StdEncoding.EncodeToString(key[:31]), hex.EncodeToString(append(key, 1))} {
		if _, err := store.ParseKEK(text); !errors.Is(err, store.ErrKEK) {
			t.Errorf("ParseKEK(%q): %v, want ErrKEK", text, err)
		}
	}
	generated, err := store.ParseKEK(store.GenerateKEK())
	if err != nil {
		t.Fatalf("a generated KEK does not parse: %v", err)
	}
	if s := fmt.Sprintf("%v %+v %#v %s", generated, generated, generated, generated); strings.Count(s, generated.ID()) != 4 {
		t.Fatalf("formatting a KEK shows more than its id: %s", s)
	}
}

// A KEK file readable or writable by anyone but its owner is refused.
func TestKEKFileMustBePrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kek")
	if err := os.WriteFile(path, []byte(store.GenerateKEK()), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.LoadKEKFile(path); err != nil {
		t.Fatalf("0600 file: %v", err)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := store.LoadKEKFile(path)
		if !errors.Is(err, store.ErrKEK) || !strings.Contains(err.Error(), "want 0600") || !strings.Contains(err.Error(), "chmod 600 "+path) {
			t.Errorf("mode %#o: %v, want a refusal", mode, err)
		}
	}
	if _, err := store.LoadKEKFile(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, store.ErrKEK) {
		t.Errorf("missing file: %v", err)
	}
}

func TestKEKFromEnv(t *testing.T) {
	t.Setenv("CAPGATE_TEST_KEK", store.GenerateKEK())
	if _, err := store.LoadKEKEnv("CAPGATE_TEST_KEK"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.LoadKEKEnv("CAPGATE_TEST_KEK_UNSET"); !errors.Is(err, store.ErrKEK) {
		t.Fatalf("unset variable: %v", err)
	}
}

// The envelope is bound to its record key and its KEK: moved to another
// key, tampered with, or opened with another KEK, it fails.
func TestEnvelopeBinding(t *testing.T) {
	kek := testKEK(t)
	other, _ := store.NewKEK(bytes.Repeat([]byte{9}, 32))
	sealed := store.Seal(kek, []byte("keyring"), []byte("secret ring"))
	if plain, err := store.OpenSealed(kek, []byte("keyring"), sealed); err != nil || string(plain) != "secret ring" {
		t.Fatalf("open = %q, %v", plain, err)
	}
	if bytes.Contains(sealed, []byte("secret")) {
		t.Fatal("plaintext in the envelope")
	}
	if again := store.Seal(kek, []byte("keyring"), []byte("secret ring")); bytes.Equal(again, sealed) {
		t.Fatal("two seals of one value are equal: nonce reused")
	}
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	for name, try := range map[string]func() ([]byte, error){
		"other record key": func() ([]byte, error) { return store.OpenSealed(kek, []byte("meta/x"), sealed) },
		"tampered":         func() ([]byte, error) { return store.OpenSealed(kek, []byte("keyring"), tampered) },
		"other KEK":        func() ([]byte, error) { return store.OpenSealed(other, []byte("keyring"), sealed) },
		"truncated":        func() ([]byte, error) { return store.OpenSealed(kek, []byte("keyring"), sealed[:10]) },
		"plaintext":        func() ([]byte, error) { return store.OpenSealed(kek, []byte("keyring"), []byte{1, 2, 3}) },
	} {
		if _, err := try(); !errors.Is(err, store.ErrKEK) {
			t.Errorf("%s: %v, want ErrKEK", name, err)
		}
	}
	if _, err := store.OpenSealed(other, []byte("keyring"), sealed); !strings.Contains(err.Error(), kek.ID()) {
		t.Errorf("wrong-KEK error %q does not name the KEK that sealed it", err)
	}
}

// The signing key ring goes through the Kafka backend wrapped: no record
// of the state or snapshot topic holds a private key, in any encoding,
// and the ring loads back intact.
func TestKafkaKeyRingNeverInPlaintext(t *testing.T) {
	opts := kafkaOptions(t)
	st := openKafka(t, opts)
	ring, err := ocap.NewKeyRing(crand.Reader, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := ring.Rotate(crand.Reader, time.Now()); err != nil { // current, next and previous
		t.Fatal(err)
	}
	plain, err := ring.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, st, func(w *store.Writer) error { return w.PutKeyRing(plain) })
	if err := st.WriteSnapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	var secrets [][]byte
	for _, k := range []*ocap.Key{ring.Current, ring.Next, ring.Previous} {
		seed := k.Private.Seed()
		secrets = append(secrets, seed, k.Private, []byte(hex.EncodeToString(seed)),
			[]byte(base64.RawURLEncoding.EncodeToString(seed)), []byte(base64.StdEncoding.EncodeToString(seed)[:40]))
	}
	records := append(topicRecords(t, opts.Topic, opts.Shard), topicRecords(t, opts.Topic+"-snapshots", opts.Shard)...)
	sawRing := false
	for _, r := range records {
		sawRing = sawRing || string(r.Key) == "keyring" || bytes.Contains(r.Value, []byte("keyring"))
		for _, secret := range secrets {
			if bytes.Contains(r.Value, secret) || bytes.Contains(r.Key, secret) {
				t.Fatalf("record %s@%d holds private key material", r.Topic, r.Offset)
			}
		}
		if bytes.Contains(r.Value, plain[:20]) {
			t.Fatalf("record %s@%d holds the serialised ring", r.Topic, r.Offset)
		}
	}
	if !sawRing {
		t.Fatal("no key ring record on the topics: the test proves nothing")
	}
	loaded, err := openKafka(t, opts).Load()
	if err != nil || !bytes.Equal(loaded.KeyRing, plain) {
		t.Fatalf("reloaded ring differs (err %v)", err)
	}
}

// Kafka mode refuses to start without a KEK, and with one other than the
// KEK that sealed the stored ring.
func TestKafkaRefusesWithoutTheKEK(t *testing.T) {
	opts := kafkaOptions(t)
	mustUpdate(t, openKafka(t, opts), func(w *store.Writer) error { return w.PutKeyRing([]byte(`{"ring":1}`)) })
	none := opts
	none.KEK = nil
	if _, err := store.OpenKafka(context.Background(), none); !errors.Is(err, store.ErrKEK) {
		t.Fatalf("no KEK: %v, want ErrKEK", err)
	}
	other := opts
	other.KEK, _ = store.NewKEK(bytes.Repeat([]byte{3}, 32))
	if st, err := store.OpenKafka(context.Background(), other); !errors.Is(err, store.ErrKEK) {
		if st != nil {
			st.Close()
		}
		t.Fatalf("another KEK: %v, want ErrKEK", err)
	}
}
