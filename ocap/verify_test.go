package ocap

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestVerifyAcceptsMinted(t *testing.T) {
	f := newFixture(t)
	tok, minted, err := f.minter.Mint(KindCapability, Claims{Subject: "m-1", Group: "billing", Topic: "orders", Partition: part(3), Epoch: 7, Ops: Ops(OpFetch)}, t0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.v.Verify(tok, KindCapability, t0.Add(30*time.Second))
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if c.Topic != "orders" || *c.Partition != 3 || c.Epoch != 7 || !c.Ops.Has(OpFetch) || c.Ops.Has(OpProduce) {
		t.Fatalf("claims = %+v", c)
	}
	if c.ID != minted.ID || len(c.ID) != 22 || c.KeyID() != f.ring.Current.ID || c.Kind() != KindCapability {
		t.Fatalf("jti %q kid %q kind %q", c.ID, c.KeyID(), c.Kind())
	}
	if int64(c.ExpiresAt)-int64(c.IssuedAt) != 60 {
		t.Fatalf("lease = %d", c.ExpiresAt-c.IssuedAt)
	}
}

func TestVerifyRejects(t *testing.T) {
	f := newFixture(t)
	priv, kid := f.ring.Current.Private, f.ring.Current.ID
	good := craft(priv, capHeader(kid), capClaims())
	if _, err := f.v.Verify(good, KindCapability, t0); err != nil {
		t.Fatalf("baseline token refused: %v", err)
	}
	h, c := capHeader(kid), capClaims()
	parts := strings.Split(good, ".")
	sigBytes, _ := base64.RawURLEncoding.DecodeString(parts[2])
	client, _, err := f.minter.Mint(KindClient, Claims{Subject: "svc", Groups: []string{"billing"}}, t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// A key that was in the ring, then rotated out entirely.
	retired := f.ring.Current
	ring2 := *f.ring
	for i := 0; i < 3; i++ {
		if err := ring2.Rotate(newSeeded(uint64(10+i)), t0); err != nil {
			t.Fatal(err)
		}
	}
	vRot, _ := NewVerifier(testConfig())
	keys, _ := ImportJWKS(f.ring.JWKS())
	vRot.SetKeys(keys)
	keys2, _ := ImportJWKS(ring2.JWKS())
	vRot.SetKeys(keys2)
	nonCanonical := parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-1] + flipLastB64(parts[2])

	cases := []struct {
		name  string
		token string
		v     *Verifier
		kind  Kind
		now   time.Time
		want  error
	}{
		{name: "alg none", token: enc(with(h, "alg", "none")) + "." + enc(c) + ".", want: ErrBadAlgorithm},
		{name: "HS256 with public key bytes", token: craftHS256(f.ring.Current.Public(), with(h, "alg", "HS256"), c), want: ErrBadAlgorithm},
		{name: "ES256 header", token: craft(priv, with(h, "alg", "ES256"), c), want: ErrBadAlgorithm},
		{name: "RS256 header", token: craft(priv, with(h, "alg", "RS256"), c), want: ErrBadAlgorithm},
		{name: "alg not a string", token: craft(priv, with(h, "alg", 1), c), want: ErrBadAlgorithm},
		{name: "unknown kid", token: craft(priv, with(h, "kid", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), c), want: ErrUnknownKid},
		{name: "missing kid", token: craft(priv, with(h, "kid", nil), c), want: ErrMissingKid},
		{name: "malformed kid", token: craft(priv, with(h, "kid", "../../etc/passwd"), c), want: ErrBadKid},
		{name: "overlong kid", token: craft(priv, with(h, "kid", strings.Repeat("a", 65)), c), want: ErrBadKid},
		{name: "wrong typ", token: craft(priv, with(h, "typ", "JWT"), c), want: ErrBadType},
		{name: "missing typ", token: craft(priv, with(h, "typ", nil), c), want: ErrBadType},
		{name: "client credential as capability", token: client, want: ErrBadType},
		{name: "capability as member token", token: good, kind: KindMember, want: ErrBadType},
		{name: "crit header", token: craft(priv, with(h, "crit", []string{"exp"}), c), want: ErrForbiddenHeader},
		{name: "jku header", token: craft(priv, with(h, "jku", "https://evil/jwks"), c), want: ErrForbiddenHeader},
		{name: "jwk header", token: craft(priv, with(h, "jwk", map[string]string{"kty": "OKP"}), c), want: ErrForbiddenHeader},
		{name: "x5u header", token: craft(priv, with(h, "x5u", "https://evil/cert"), c), want: ErrForbiddenHeader},
		{name: "x5c header", token: craft(priv, with(h, "x5c", []string{"MIIB"}), c), want: ErrForbiddenHeader},
		{name: "unknown header", token: craft(priv, with(h, "zzz", 1), c), want: ErrForbiddenHeader},
		{name: "tampered payload", token: parts[0] + "." + enc(with(c, "pt", 4)) + "." + parts[2], want: ErrBadSignature},
		{name: "tampered header", token: enc(with(h, "typ", string(KindCapability), "alg", "EdDSA", "kid", kid)) + "x." + parts[1] + "." + parts[2], want: ErrMalformed},
		{name: "truncated signature", token: parts[0] + "." + parts[1] + "." + parts[2][:40], want: ErrBadSignature},
		{name: "empty signature", token: parts[0] + "." + parts[1] + ".", want: ErrBadSignature},
		{name: "zeroed signature", token: parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(make([]byte, len(sigBytes))), want: ErrBadSignature},
		{name: "2 segments", token: parts[0] + "." + parts[1], want: ErrMalformed},
		{name: "4 segments", token: good + "." + parts[2], want: ErrMalformed},
		{name: "2000 dots", token: strings.Repeat(".", 2000), want: ErrMalformed},
		{name: "empty", token: "", want: ErrMalformed},
		{name: "non-canonical base64 signature", token: nonCanonical, want: ErrBadSignature},
		{name: "padded base64 header", token: parts[0] + "=." + parts[1] + "." + parts[2], want: ErrMalformed},
		{name: "std base64 alphabet", token: strings.NewReplacer("-", "+", "_", "/").Replace(parts[0]+"-_") + "." + parts[1] + "." + parts[2], want: ErrMalformed},
		{name: "oversize", token: good + strings.Repeat("A", MaxTokenBytes), want: ErrTooLarge},
		{name: "expired beyond leeway", token: good, now: t0.Add(62 * time.Second), want: ErrExpired},
		{name: "missing exp", token: craft(priv, h, with(c, "exp", nil)), want: ErrMissingExp},
		{name: "nbf in the future", token: craft(priv, h, with(c, "nbf", t0.Unix()+3)), want: ErrNotYetValid},
		{name: "iat in the future", token: craft(priv, h, with(c, "iat", t0.Unix()+3, "nbf", nil)), want: ErrIssuedInFuture},
		{name: "missing iat", token: craft(priv, h, with(c, "iat", nil)), want: ErrMissingIat},
		{name: "lease longer than max_lease", token: craft(priv, h, with(c, "exp", t0.Unix()+601)), want: ErrLeaseTooLong},
		{name: "exp 1e300", token: craftRaw(priv, mustJSON(h), strings.Replace(mustJSON(c), `"exp":`+itoa(t0.Unix()+60), `"exp":1e300`, 1)), want: ErrBadTime},
		{name: "quoted exp", token: craft(priv, h, with(c, "exp", itoa(t0.Unix()+60))), want: ErrBadTime},
		{name: "fractional exp", token: craft(priv, h, with(c, "exp", float64(t0.Unix())+60.5)), want: ErrBadTime},
		{name: "wrong iss", token: craft(priv, h, with(c, "iss", "coord-2")), want: ErrBadIssuer},
		{name: "missing iss", token: craft(priv, h, with(c, "iss", nil)), want: ErrBadIssuer},
		{name: "wrong aud", token: craft(priv, h, with(c, "aud", "staging")), want: ErrBadAudience},
		{name: "missing aud", token: craft(priv, h, with(c, "aud", nil)), want: ErrBadAudience},
		{name: "aud as list", token: craft(priv, h, with(c, "aud", []string{"prod-eu"})), want: ErrBadClaims},
		{name: "negative partition", token: craft(priv, h, with(c, "pt", -1)), want: ErrBadPartition},
		{name: "missing partition", token: craft(priv, h, with(c, "pt", nil)), want: ErrBadPartition},
		{name: "partition 2^31", token: craft(priv, h, with(c, "pt", int64(1)<<31)), want: ErrBadClaims},
		{name: "unknown op", token: craft(priv, h, with(c, "op", []string{"fetch", "delete"})), want: ErrUnknownOp},
		{name: "no ops", token: craft(priv, h, with(c, "op", []string{})), want: ErrNoOps},
		{name: "missing jti", token: craft(priv, h, with(c, "jti", nil)), want: ErrBadJTI},
		{name: "short jti", token: craft(priv, h, with(c, "jti", "abc")), want: ErrBadJTI},
		{name: "bad topic", token: craft(priv, h, with(c, "tp", "orders/../x")), want: ErrBadTopic},
		{name: "missing sub", token: craft(priv, h, with(c, "sub", nil)), want: ErrBadSubject},
		{name: "unknown claim", token: craft(priv, h, with(c, "admin", true)), want: ErrBadClaims},
		{name: "epoch without group", token: craft(priv, h, with(c, "grp", nil)), want: ErrBadGroup},
		{name: "inverted offset range", token: craft(priv, h, with(c, "off", []int64{10, 5})), want: ErrBadOffsetRange},
		{name: "signed by a retired key", token: craft(retired.Private, capHeader(retired.ID), c), v: vRot, want: ErrKeyRetired},
		{name: "signed by another key with our kid", token: craft(f.ring.Next.Private, h, c), want: ErrBadSignature},
		{name: "kid not a string", token: craft(priv, with(h, "kid", 7), c), want: ErrBadKid},
		{name: "duplicate alg, none last", token: craftRaw(priv, `{"alg":"EdDSA","kid":"`+kid+`","typ":"capgate+jwt","alg":"none"}`, mustJSON(c)), want: ErrBadAlgorithm},
		{name: "header not an object", token: craftRaw(priv, `["EdDSA"]`, mustJSON(c)), want: ErrMalformed},
		{name: "claims not an object", token: craftRaw(priv, mustJSON(h), `[1]`), want: ErrBadClaims},
		{name: "trailing data after claims", token: craftRaw(priv, mustJSON(h), mustJSON(c)+` {}`), want: ErrBadClaims},
		{name: "non-canonical base64 payload", token: parts[0] + "." + parts[1][:len(parts[1])-1] + flipLastB64(parts[1]) + "." + parts[2], want: ErrMalformed},
		{name: "exp before iat", token: craft(priv, h, with(c, "exp", t0.Unix()-1, "iat", t0.Unix(), "nbf", nil)), want: ErrBadTime},
	}
	if len(cases) < 25 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, kind, now := f.v, KindCapability, t0
			if tc.v != nil {
				v = tc.v
			}
			if tc.kind != "" {
				kind = tc.kind
			}
			if !tc.now.IsZero() {
				now = tc.now
			}
			got, err := v.Verify(tc.token, kind, now)
			if err == nil {
				t.Fatalf("accepted: %+v", got)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			// The reason reaches 401 bodies: no fmt verb gone wrong
			// (a numeric kid printed "%!q(float64=7)").
			if strings.Contains(err.Error(), "%!") {
				t.Fatalf("err = %v: a formatting error in the reason", err)
			}
			// In capgate's words: one "ocap:", nothing of golang-jwt's
			// or encoding/json's (reasons.go).
			for _, foreign := range foreignWording {
				if strings.Contains(err.Error(), foreign) || strings.Count(err.Error(), "ocap:") != 1 {
					t.Fatalf("err = %v: not in capgate's words (%q)", err, foreign)
				}
			}
		})
	}
}

func TestVerifyExpiryBoundary(t *testing.T) {
	f := newFixture(t)
	tok := craft(f.ring.Current.Private, capHeader(f.ring.Current.ID), capClaims())
	exp := t0.Add(60 * time.Second)
	// Leeway is 2 s: valid while now < exp + 2 s.
	if _, err := f.v.Verify(tok, KindCapability, exp.Add(1*time.Second)); err != nil {
		t.Fatalf("just inside leeway: %v", err)
	}
	if _, err := f.v.Verify(tok, KindCapability, exp.Add(1999*time.Millisecond)); err != nil {
		t.Fatalf("last instant inside leeway: %v", err)
	}
	if _, err := f.v.Verify(tok, KindCapability, exp.Add(2*time.Second)); !errors.Is(err, ErrExpired) {
		t.Fatalf("at exp+leeway: %v, want ErrExpired", err)
	}
	// iat just inside the future leeway is accepted.
	c := with(capClaims(), "iat", t0.Unix()+2, "nbf", t0.Unix()+2)
	if _, err := f.v.Verify(craft(f.ring.Current.Private, capHeader(f.ring.Current.ID), c), KindCapability, t0); err != nil {
		t.Fatalf("iat within leeway: %v", err)
	}
}

// TestVerifyExpiredWithin: the renewal grace's check takes a token up to
// grace past exp + leeway and no later, and keeps every other rule: an
// iat in the future beyond the plain leeway, a bad signature.
func TestVerifyExpiredWithin(t *testing.T) {
	f := newFixture(t)
	tok := craft(f.ring.Current.Private, capHeader(f.ring.Current.ID), capClaims())
	exp := t0.Add(60 * time.Second)
	const grace = 5 * time.Second
	if _, err := f.v.VerifyExpiredWithin(tok, KindCapability, exp.Add(6999*time.Millisecond), grace); err != nil {
		t.Fatalf("inside leeway + grace: %v", err)
	}
	if _, err := f.v.VerifyExpiredWithin(tok, KindCapability, exp.Add(7*time.Second), grace); !errors.Is(err, ErrExpired) {
		t.Fatalf("at exp + leeway + grace: %v, want ErrExpired", err)
	}
	if _, err := f.v.VerifyExpiredWithin(tok, KindCapability, exp.Add(2*time.Second), 0); !errors.Is(err, ErrExpired) {
		t.Fatalf("no grace at exp + leeway: %v, want ErrExpired", err)
	}
	future := with(capClaims(), "iat", t0.Unix()+4, "nbf", t0.Unix())
	if _, err := f.v.VerifyExpiredWithin(craft(f.ring.Current.Private, capHeader(f.ring.Current.ID), future), KindCapability, t0, grace); !errors.Is(err, ErrBadTime) {
		t.Fatalf("iat 4 s ahead (leeway 2 s) with a grace: %v, want ErrBadTime", err)
	}
	if _, err := f.v.VerifyExpiredWithin(flipLastB64(tok), KindCapability, exp.Add(time.Second), grace); err == nil {
		t.Fatal("a bad signature verified within the grace")
	}
}

func TestVerifierConfigBounds(t *testing.T) {
	cfg := testConfig()
	cfg.Leeway = 3 * time.Second
	if _, err := NewVerifier(cfg); err == nil || !strings.Contains(err.Error(), "leeway") {
		t.Fatalf("leeway 3s accepted: %v", err)
	}
	cfg = testConfig()
	cfg.Audience = ""
	if _, err := NewVerifier(cfg); err == nil {
		t.Fatal("empty audience accepted")
	}
}

func TestTokenKindsAreDistinct(t *testing.T) {
	f := newFixture(t)
	member, _, err := f.minter.Mint(KindMember, Claims{Subject: "m-1", Group: "billing"}, t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.v.Verify(member, KindMember, t0); err != nil {
		t.Fatal(err)
	}
	for _, k := range []Kind{KindCapability, KindClient} {
		if _, err := f.v.Verify(member, k, t0); !errors.Is(err, ErrBadType) {
			t.Fatalf("member token as %s: %v", k, err)
		}
	}
	if _, _, err := f.minter.Mint(KindMember, Claims{Subject: "m-1", Group: "billing", Topic: "orders"}, t0, time.Hour); !errors.Is(err, ErrBadClaims) {
		t.Fatalf("minted a member token with a topic: %v", err)
	}
	if _, _, err := f.minter.Mint(KindCapability, Claims{Subject: "m", Topic: "t", Partition: part(0), Ops: Ops(OpFetch)}, t0, 11*time.Minute); !errors.Is(err, ErrLeaseTooLong) {
		t.Fatalf("minted a capability beyond max_lease: %v", err)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// flipLastB64 returns a different final character that decodes to the
// same bytes only if trailing bits are ignored (non-canonical encoding).
func flipLastB64(s string) string {
	const alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alpha, s[len(s)-1])
	// 64-byte signature: 86 chars, the last carries 2 data bits + 4 zero bits.
	return string(alpha[i|1])
}

// Expired-token errors say when, for people: RFC 3339 and how long ago,
// not epoch seconds (issue #13).
func TestExpiredTokenErrorsShowHumanTimes(t *testing.T) {
	now := time.Date(2026, 12, 3, 3, 7, 5, 0, time.UTC)
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{now.Add(-3 * time.Minute), "2026-12-03T03:04:05Z, 3m ago"},
		{now.Add(-3*time.Minute - 12*time.Second), "2026-12-03T03:03:53Z, 3m12s ago"},
		{now.Add(-26 * time.Hour), "2026-12-02T01:07:05Z, 1d2h ago"},
		{now.Add(42 * time.Second), "2026-12-03T03:07:47Z, in 42s"},
	} {
		if got := TimeText(Seconds(tc.at.Unix()), now); got != tc.want {
			t.Errorf("TimeText(%v): %q, want %q", tc.at, got, tc.want)
		}
	}
}
