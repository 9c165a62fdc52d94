package ocap

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzVerify: Verify never panics; a valid token with any byte changed —
// header, payload, signature or a dot — is never accepted (strict
// base64url: no two encodings of the same bytes); and a token whose header
// and claims are arbitrary JSON, correctly signed with the verifier's own
// key, is accepted only when its header is exactly {alg: EdDSA, kid: the
// signing kid, typ: capgate+jwt} and its claims keep every rule.
func FuzzVerify(f *testing.F) {
	fx := newFixture(f)
	good, _, err := fx.minter.Mint(KindCapability, Claims{Subject: "m", Group: "g", Topic: "orders", Partition: part(1), Epoch: 2, Ops: Ops(OpFetch)}, t0, time.Minute)
	if err != nil {
		f.Fatal(err)
	}
	kid := fx.ring.Current.ID
	head, claims := mustJSON(capHeader(kid)), mustJSON(with(capClaims(), "iss", "coord-1"))
	f.Add(good, 0, byte(1), head, claims)
	f.Add(good, len(good)-1, byte('A'), mustJSON(with(capHeader(kid), "crit", []string{"exp"})), claims)
	f.Add(good, strings.IndexByte(good, '.')+3, byte('x'), mustJSON(with(capHeader(kid), "typ", "JWT")), mustJSON(with(capClaims(), "exp", 1e300)))
	f.Add(good, strings.IndexByte(good, '.'), byte('.'), `{"alg":"EdDSA","kid":"`+kid+`","typ":"capgate+jwt","alg":"none"}`, mustJSON(with(capClaims(), "x", 1)))
	f.Add("", 0, byte(0), `{"alg":"EdDSA","kid":"`+kid+`","typ":"capgate+jwt"} `, `{"iss":"coord-1"}`)
	f.Add(strings.Repeat(".", 50), 3, byte('a'), `[]`, `null`)
	f.Add("eyJhbGciOiJub25lIn0.e30.", 1, byte('.'), `{"alg":"EdDSA","kid":1,"typ":"capgate+jwt"}`, claims)
	f.Fuzz(func(t *testing.T, token string, pos int, b byte, header, body string) {
		fx.v.Verify(token, KindCapability, t0) // must not panic
		if pos >= 0 && pos < len(good) && good[pos] != b {
			mutated := good[:pos] + string(b) + good[pos+1:]
			if c, err := fx.v.Verify(mutated, KindCapability, t0); err == nil {
				t.Fatalf("mutated token accepted at %d (%q→%q): %+v", pos, good[pos], b, c)
			}
		}
		signed := craftRaw(fx.ring.Current.Private, header, body)
		c, err := fx.v.Verify(signed, KindCapability, t0)
		if err != nil {
			return
		}
		checkAcceptedHeader(t, header, kid)
		checkAcceptedClaims(t, body, c)
	})
}

// checkAcceptedHeader: an accepted header is one JSON object with exactly
// alg EdDSA, the signing kid and typ capgate+jwt, nothing else.
func checkAcceptedHeader(t *testing.T, header, kid string) {
	t.Helper()
	var h map[string]any
	if err := json.Unmarshal([]byte(header), &h); err != nil {
		t.Fatalf("accepted a header that is not a JSON object: %q: %v", header, err)
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"alg", "kid", "typ"}) || h["alg"] != "EdDSA" || h["kid"] != kid || h["typ"] != string(KindCapability) {
		t.Fatalf("accepted header %q", header)
	}
}

// checkAcceptedClaims: accepted claims are a JSON object of known claims
// only, and the result keeps the verifier's rules.
func checkAcceptedClaims(t *testing.T, body string, c *Claims) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.DisallowUnknownFields()
	var again Claims
	if err := dec.Decode(&again); err != nil {
		t.Fatalf("accepted claims with an unknown or malformed field: %q: %v", body, err)
	}
	cfg := testConfig()
	lease := time.Duration(c.ExpiresAt-c.IssuedAt) * time.Second
	switch {
	case c.Issuer != cfg.Issuer || c.Audience != cfg.Audience:
		t.Fatalf("accepted iss %q aud %q", c.Issuer, c.Audience)
	case c.IssuedAt == 0 || c.ExpiresAt <= c.IssuedAt || lease > cfg.MaxLease:
		t.Fatalf("accepted iat %d exp %d", c.IssuedAt, c.ExpiresAt)
	case t0.Unix() >= int64(c.ExpiresAt)+int64(cfg.Leeway/time.Second) || int64(c.IssuedAt) > t0.Unix()+int64(cfg.Leeway/time.Second):
		t.Fatalf("accepted outside its lifetime at %d: iat %d exp %d", t0.Unix(), c.IssuedAt, c.ExpiresAt)
	case c.Partition == nil || *c.Partition < 0 || c.Ops == 0 || c.Ops&^opsAll != 0 || !ValidTopic(c.Topic) || !validJTI(c.ID):
		t.Fatalf("accepted capability claims %+v", c)
	}
}
