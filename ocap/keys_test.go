package ocap

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

func TestKeyRingRotationAndJWKS(t *testing.T) {
	f := newFixture(t)
	tokOld, _ := mintCap(t, f, 0, 5*time.Minute)
	if err := f.ring.Rotate(newSeeded(5), t0); err != nil {
		t.Fatal(err)
	}
	f.minter.SetRing(f.ring)
	tokNew, cNew := mintCap(t, f, 1, 5*time.Minute)
	keys, err := ImportJWKS(f.ring.JWKS())
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 {
		t.Fatalf("jwks has %d keys, want current, next, previous", len(keys))
	}
	removed := f.v.SetKeys(keys)
	if len(removed) != 0 {
		t.Fatalf("removed %v", removed)
	}
	// The old current (now previous) still verifies; the new one too.
	for _, tok := range []string{tokOld, tokNew} {
		if _, err := f.v.Verify(tok, KindCapability, t0); err != nil {
			t.Fatal(err)
		}
	}
	if cNew.KeyID() != f.ring.Current.ID {
		t.Fatal("minted with a key other than current")
	}
	// Two more rotations retire the key that signed tokOld.
	oldKid := f.ring.Previous.ID
	f.ring.Rotate(newSeeded(6), t0)
	f.ring.Rotate(newSeeded(8), t0)
	keys, _ = ImportJWKS(f.ring.JWKS())
	removed = f.v.SetKeys(keys)
	if len(removed) == 0 || !contains(removed, oldKid) {
		t.Fatalf("removed %v, want %s", removed, oldKid)
	}
	if _, err := f.v.Verify(tokOld, KindCapability, t0); !errors.Is(err, ErrKeyRetired) {
		t.Fatalf("token of retired key: %v", err)
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func TestImportJWKSRefusesBadKeys(t *testing.T) {
	good := PublicJWK("abc", make([]byte, 32))
	for name, k := range map[string]api.JWK{
		"rsa":       {Kty: "RSA", Kid: "abc", X: good.X},
		"x25519":    {Kty: "OKP", Crv: "X25519", Kid: "abc", X: good.X},
		"short x":   {Kty: "OKP", Crv: "Ed25519", Kid: "abc", X: "AAAA"},
		"bad kid":   {Kty: "OKP", Crv: "Ed25519", Kid: "a b", X: good.X},
		"enc use":   {Kty: "OKP", Crv: "Ed25519", Kid: "abc", X: good.X, Use: "enc"},
		"other alg": {Kty: "OKP", Crv: "Ed25519", Kid: "abc", X: good.X, Alg: "ES256"},
	} {
		if _, err := ImportJWKS(api.JWKS{Keys: []api.JWK{k}}); !errors.Is(err, ErrBadJWK) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestKeyRingFile(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "keys.json")
	if err := f.ring.SaveFile(path); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
	back, err := LoadKeyRingFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Current.ID != f.ring.Current.ID || back.Next.ID != f.ring.Next.ID || !back.Current.Private.Equal(f.ring.Current.Private) {
		t.Fatal("ring changed through the file")
	}
	os.Chmod(path, 0o644)
	if _, err := LoadKeyRingFile(path); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Fatalf("world-readable key file accepted: %v", err)
	}
	// A kid that does not match its key is refused.
	b, _ := f.ring.MarshalBinary()
	bad := strings.Replace(string(b), f.ring.Current.ID, strings.Repeat("A", 43), 1)
	var r KeyRing
	if err := r.UnmarshalBinary([]byte(bad)); err == nil {
		t.Fatal("mismatched kid accepted")
	}
}

func TestThumbprintRFC8037(t *testing.T) {
	// RFC 8037 appendix A.3: thumbprint of the example Ed25519 key.
	x := "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
	pub, err := b64.DecodeString(x)
	if err != nil {
		t.Fatal(err)
	}
	if got := Thumbprint(pub); got != "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k" {
		t.Fatalf("thumbprint = %s", got)
	}
}
