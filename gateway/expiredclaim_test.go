package gateway

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/capgate/capgate/ocap"
)

// TestExpiredClaimAgreesWithTheVerifier: the unverified exp test refuses
// exactly the tokens the verifier refuses as expired, at the leeway's
// edge too — never one the verifier takes.
func TestExpiredClaimAgreesWithTheVerifier(t *testing.T) {
	ring, err := ocap.NewKeyRing(rand.Reader, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg := testVerifierConfig()
	m, err := ocap.NewMinter(cfg, ring, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ocap.NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ocap.ImportJWKS(ring.JWKS())
	if err != nil {
		t.Fatal(err)
	}
	v.SetKeys(keys)
	iat := time.Unix(time.Now().Unix(), 0)
	tok, claims, err := m.Mint(ocap.KindCapability, capClaims(0), iat, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	edge := time.Unix(int64(claims.ExpiresAt), 0).Add(cfg.Leeway)
	for _, now := range []time.Time{iat, edge.Add(-time.Second), edge.Add(-time.Nanosecond), edge, edge.Add(time.Nanosecond), edge.Add(time.Hour)} {
		_, verr := v.Verify(tok, ocap.KindCapability, now)
		cerr := expiredClaim(tok, cfg.Leeway, now)
		if errors.Is(verr, ocap.ErrExpired) != (cerr != nil) {
			t.Fatalf("at exp+leeway%+v: verifier %v, claim test %v", now.Sub(edge), verr, cerr)
		}
		if cerr != nil && !errors.Is(cerr, ocap.ErrExpired) {
			t.Fatalf("claim test refusal %v is not ErrExpired", cerr)
		}
	}
	for _, bad := range []string{"", "x", "a.b", "a.!!!.c", "a.e30.c", "a." + b64(`{"EXP":1}`) + ".c", "a." + b64(`{"exp":"1"}`) + ".c"} {
		if err := expiredClaim(bad, cfg.Leeway, edge.Add(time.Hour)); err != nil {
			t.Fatalf("%q: %v, want no verdict (the verifier decides)", bad, err)
		}
	}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
