package ocap

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/secretfile"
)

// Key is one Ed25519 signing key with its id (the RFC 7638 thumbprint of
// its public JWK).
type Key struct {
	ID      string
	Private ed25519.PrivateKey
	Created time.Time
}

// Public returns the verification half.
func (k *Key) Public() ed25519.PublicKey { return k.Private.Public().(ed25519.PublicKey) }

// GenerateKey makes a new key from rand (crypto/rand.Reader in production).
func GenerateKey(rand io.Reader, now time.Time) (*Key, error) {
	pub, priv, err := ed25519.GenerateKey(rand)
	if err != nil {
		return nil, fmt.Errorf("ocap: generate key: %w", err)
	}
	return &Key{ID: Thumbprint(pub), Private: priv, Created: now.UTC()}, nil
}

// Thumbprint is the RFC 7638 JWK thumbprint of an Ed25519 public key,
// base64url without padding (43 characters).
func Thumbprint(pub ed25519.PublicKey) string {
	canon := `{"crv":"Ed25519","kty":"OKP","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}`
	sum := sha256.Sum256([]byte(canon))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// ValidKeyID reports whether kid has the syntax capgate uses: 1 to 64
// characters of the base64url alphabet.
func ValidKeyID(kid string) bool {
	if len(kid) == 0 || len(kid) > 64 {
		return false
	}
	for i := 0; i < len(kid); i++ {
		if !isB64URL(kid[i]) {
			return false
		}
	}
	return true
}

func isB64URL(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// KeyRing holds the coordinator's signing keys: Current signs, Next is
// published ahead of use so gateways know it before it signs, Previous is
// still accepted until tokens it signed have expired. Not safe for
// concurrent use.
type KeyRing struct {
	Current, Next, Previous *Key
}

// NewKeyRing makes a ring with fresh current and next keys.
func NewKeyRing(rand io.Reader, now time.Time) (*KeyRing, error) {
	cur, err := GenerateKey(rand, now)
	if err != nil {
		return nil, err
	}
	next, err := GenerateKey(rand, now)
	if err != nil {
		return nil, err
	}
	return &KeyRing{Current: cur, Next: next}, nil
}

// Rotate retires Previous, demotes Current, promotes Next and makes a new
// Next.
func (r *KeyRing) Rotate(rand io.Reader, now time.Time) error {
	next, err := GenerateKey(rand, now)
	if err != nil {
		return err
	}
	r.Previous, r.Current, r.Next = r.Current, r.Next, next
	return nil
}

// Keys lists the ring's keys, current first.
func (r *KeyRing) Keys() []*Key {
	var out []*Key
	for _, k := range []*Key{r.Current, r.Next, r.Previous} {
		if k != nil {
			out = append(out, k)
		}
	}
	return out
}

// JWKS exports the public keys (RFC 7517/8037 OKP).
func (r *KeyRing) JWKS() api.JWKS {
	set := api.JWKS{Keys: []api.JWK{}}
	for _, k := range r.Keys() {
		set.Keys = append(set.Keys, PublicJWK(k.ID, k.Public()))
	}
	return set
}

// PublicJWK renders one public key as a JWK.
func PublicJWK(kid string, pub ed25519.PublicKey) api.JWK {
	return api.JWK{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(pub), Kid: kid, Use: "sig", Alg: "EdDSA"}
}

// ErrBadJWK is returned for a JWK capgate cannot use.
var ErrBadJWK = errors.New("ocap: bad jwk")

// ImportJWKS turns a JWK set into kid → public key, refusing anything that
// is not an Ed25519 OKP signing key with a valid kid.
func ImportJWKS(set api.JWKS) (map[string]ed25519.PublicKey, error) {
	out := make(map[string]ed25519.PublicKey, len(set.Keys))
	for _, k := range set.Keys {
		pub, err := importJWK(k)
		if err != nil {
			return nil, err
		}
		out[k.Kid] = pub
	}
	return out, nil
}

func importJWK(k api.JWK) (ed25519.PublicKey, error) {
	switch {
	case k.Kty != "OKP" || k.Crv != "Ed25519":
		return nil, fmt.Errorf("%w: kid %q: kty %q crv %q, want OKP Ed25519", ErrBadJWK, k.Kid, k.Kty, k.Crv)
	case !ValidKeyID(k.Kid):
		return nil, fmt.Errorf("%w: kid %q malformed", ErrBadJWK, k.Kid)
	case k.Use != "" && k.Use != "sig", k.Alg != "" && k.Alg != "EdDSA":
		return nil, fmt.Errorf("%w: kid %q: use %q alg %q", ErrBadJWK, k.Kid, k.Use, k.Alg)
	}
	x, err := base64.RawURLEncoding.Strict().DecodeString(k.X)
	if err != nil || len(x) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: kid %q: x is not a 32-byte base64url key", ErrBadJWK, k.Kid)
	}
	return ed25519.PublicKey(x), nil
}

// persistedKey is the on-disk form of a key: the 32-byte seed.
type persistedKey struct {
	ID      string    `json:"kid"`
	Seed    string    `json:"seed"`
	Created time.Time `json:"created"`
}

type persistedRing struct {
	Version  int           `json:"version"`
	Current  *persistedKey `json:"current"`
	Next     *persistedKey `json:"next,omitempty"`
	Previous *persistedKey `json:"previous,omitempty"`
}

// MarshalBinary encodes the ring including private keys. Store it only
// where nobody else can read it (file mode 0600, see SaveFile).
func (r *KeyRing) MarshalBinary() ([]byte, error) {
	if r.Current == nil {
		return nil, errors.New("ocap: key ring has no current key")
	}
	return json.Marshal(persistedRing{Version: 1, Current: persist(r.Current), Next: persist(r.Next), Previous: persist(r.Previous)})
}

func persist(k *Key) *persistedKey {
	if k == nil {
		return nil
	}
	return &persistedKey{ID: k.ID, Seed: base64.RawURLEncoding.EncodeToString(k.Private.Seed()), Created: k.Created}
}

// UnmarshalBinary decodes a ring written by MarshalBinary, checking that
// every kid matches its key.
func (r *KeyRing) UnmarshalBinary(b []byte) error {
	var p persistedRing
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("ocap: decode key ring: %w", err)
	}
	if p.Version != 1 || p.Current == nil {
		return fmt.Errorf("ocap: decode key ring: version %d, current present %t", p.Version, p.Current != nil)
	}
	var ring KeyRing
	for _, e := range []struct {
		dst **Key
		src *persistedKey
	}{{&ring.Current, p.Current}, {&ring.Next, p.Next}, {&ring.Previous, p.Previous}} {
		k, err := restore(e.src)
		if err != nil {
			return err
		}
		*e.dst = k
	}
	*r = ring
	return nil
}

func restore(p *persistedKey) (*Key, error) {
	if p == nil {
		return nil, nil
	}
	seed, err := base64.RawURLEncoding.Strict().DecodeString(p.Seed)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("ocap: decode key ring: key %q: bad seed", p.ID)
	}
	k := &Key{Private: ed25519.NewKeyFromSeed(seed), Created: p.Created}
	if k.ID = Thumbprint(k.Public()); k.ID != p.ID {
		return nil, fmt.Errorf("ocap: decode key ring: kid %q does not match its key", p.ID)
	}
	return k, nil
}

// SaveFile writes the ring to path with mode 0600, atomically (write to a
// temporary file in the same directory, then rename).
func (r *KeyRing) SaveFile(path string) error {
	b, err := r.MarshalBinary()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keys-*")
	if err != nil {
		return fmt.Errorf("ocap: save key ring: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err == nil {
		if _, err = tmp.Write(b); err == nil {
			err = tmp.Sync()
		}
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("ocap: save key ring: %w", err)
	}
	return nil
}

// keyRingFileMax bounds a key ring file read: three keys take ~1 KiB.
const keyRingFileMax = 64 << 10

// LoadKeyRingFile reads a ring written by SaveFile, refusing a file that
// group or others can read (secretfile, the one rule for key files).
func LoadKeyRingFile(path string) (*KeyRing, error) {
	b, err := secretfile.Read(path, keyRingFileMax)
	if err != nil {
		return nil, fmt.Errorf("ocap: load key ring: %w", err)
	}
	var r KeyRing
	if err := r.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	return &r, nil
}
