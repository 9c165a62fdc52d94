package ocap

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Unix(1_800_000_000, 0)

// seeded is a deterministic io.Reader for keys and jtis in tests.
type seeded struct{ r *rand.ChaCha8 }

func newSeeded(seed uint64) *seeded {
	var s [32]byte
	s[0] = byte(seed)
	return &seeded{rand.NewChaCha8(s)}
}

func (s *seeded) Read(p []byte) (int, error) { return s.r.Read(p) }

func testConfig() VerifierConfig {
	return VerifierConfig{Issuer: "coord-1", Audience: "prod-eu", Leeway: 2 * time.Second, MaxLease: 10 * time.Minute}
}

type fixture struct {
	ring   *KeyRing
	minter *Minter
	v      *Verifier
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	rnd := newSeeded(1)
	ring, err := NewKeyRing(rnd, t0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMinter(testConfig(), ring, rnd)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ImportJWKS(ring.JWKS())
	if err != nil {
		t.Fatal(err)
	}
	v.SetKeys(keys)
	return &fixture{ring: ring, minter: m, v: v}
}

func part(p int32) *int32 { return &p }

// capClaims is a valid capability's claims at t0 (lease 60 s).
func capClaims() map[string]any {
	return map[string]any{
		"iss": "coord-1", "aud": "prod-eu", "sub": "member-1",
		"jti": "AAAAAAAAAAAAAAAAAAAAAA", "iat": t0.Unix(), "nbf": t0.Unix(), "exp": t0.Unix() + 60,
		"grp": "billing", "tp": "orders", "pt": 3, "ep": 7, "op": []string{"fetch", "commit"},
	}
}

func capHeader(kid string) map[string]any {
	return map[string]any{"alg": "EdDSA", "kid": kid, "typ": string(KindCapability)}
}

func enc(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// craft signs arbitrary header and claims with priv (Ed25519).
func craft(priv ed25519.PrivateKey, header, claims any) string {
	signing := enc(header) + "." + enc(claims)
	return signing + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(signing)))
}

func craftRaw(priv ed25519.PrivateKey, headerJSON, claimsJSON string) string {
	signing := base64.RawURLEncoding.EncodeToString([]byte(headerJSON)) + "." + base64.RawURLEncoding.EncodeToString([]byte(claimsJSON))
	return signing + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(signing)))
}

func craftHS256(secret []byte, header, claims any) string {
	signing := enc(header) + "." + enc(claims)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(signing))
	return signing + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func with(m map[string]any, kv ...any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
			continue
		}
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}
