package ocap

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestParseClientOps: a client credential's vocabulary is consume and
// produce; a capability's op (fetch, commit) or a made-up one is
// ErrUnknownOp naming it, and no list is the default, consume alone. A
// capability's parser refuses consume.
func TestParseClientOps(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  Ops
		err   error
	}{
		{nil, Ops(OpConsume), nil},
		{[]string{"consume"}, Ops(OpConsume), nil},
		{[]string{"consume", "produce"}, Ops(OpConsume | OpProduce), nil},
		{[]string{"produce", "consume", "produce"}, Ops(OpConsume | OpProduce), nil},
		{[]string{"produce"}, Ops(OpProduce), nil}, // parsed; refused by checkShape (consume required)
		{[]string{"consume", "fetch"}, 0, ErrUnknownOp},
		{[]string{"commit"}, 0, ErrUnknownOp},
		{[]string{"write"}, 0, ErrUnknownOp},
		{[]string{""}, 0, ErrUnknownOp},
		{[]string{"Consume"}, 0, ErrUnknownOp},
	} {
		got, err := ParseClientOps(tc.names)
		if !errors.Is(err, tc.err) || got != tc.want {
			t.Errorf("ParseClientOps(%q) = %s, %v; want %s, %v", tc.names, got, err, tc.want, tc.err)
		}
		if err != nil && !strings.Contains(err.Error(), "consume, produce") {
			t.Errorf("ParseClientOps(%q): %v does not say which ops exist", tc.names, err)
		}
	}
	if _, err := ParseOps([]string{"fetch", "consume"}); !errors.Is(err, ErrUnknownOp) {
		t.Fatalf("ParseOps(consume) = %v, want ErrUnknownOp (not a capability's op)", err)
	}
	if got := Ops(OpConsume | OpProduce).String(); got != "consume,produce" {
		t.Fatalf("String = %q", got)
	}
}

// TestClientCredentialOpClaim: a client credential minted with consume and
// produce carries op and verifies with both; a consume-only one carries
// no op claim at all (what credentials minted before ops were, so a
// gateway of either version verifies it) and allows consume alone, as
// does every credential without the claim. Other ops, produce without
// consume, and consume in a capability are refused at verification.
func TestClientCredentialOpClaim(t *testing.T) {
	f := newFixture(t)
	priv, kid := f.ring.Current.Private, f.ring.Current.ID
	base := Claims{Subject: "svc", Groups: []string{"g"}, Topics: []string{"orders", "logs-*"}}

	rw := base
	rw.Ops = Ops(OpConsume | OpProduce)
	tok, _, err := f.minter.Mint(KindClient, rw, t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.v.Verify(tok, KindClient, t0)
	if err != nil {
		t.Fatal(err)
	}
	if c.ClientOps() != Ops(OpConsume|OpProduce) || !c.MayProduceTo("orders") || !c.ProducesAnywhere() {
		t.Fatalf("consume+produce credential: ops %s, may produce to orders %v", c.ClientOps(), c.MayProduceTo("orders"))
	}
	if c.MayProduceTo("logs-a") || c.MayProduceTo("other") {
		t.Fatal("a pattern entry (logs-*) or an unnamed topic grants produce")
	}

	for name, ops := range map[string]Ops{"consume": Ops(OpConsume), "default": 0} {
		ro := base
		ro.Ops = ops
		tok, minted, err := f.minter.Mint(KindClient, ro, t0, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
		if strings.Contains(string(payload), `"op"`) || minted.Ops != 0 {
			t.Fatalf("%s: a consume-only credential carries op: %s", name, payload)
		}
		c, err := f.v.Verify(tok, KindClient, t0)
		if err != nil {
			t.Fatal(err)
		}
		if c.ClientOps() != Ops(OpConsume) || c.MayProduceTo("orders") || c.ProducesAnywhere() {
			t.Fatalf("%s: ops %s, may produce to orders %v, want consume only", name, c.ClientOps(), c.MayProduceTo("orders"))
		}
	}

	h := map[string]any{"alg": "EdDSA", "kid": kid, "typ": string(KindClient)}
	claims := map[string]any{"iss": "coord-1", "aud": "prod-eu", "sub": "svc", "jti": "AAAAAAAAAAAAAAAAAAAAAA",
		"iat": t0.Unix(), "nbf": t0.Unix(), "exp": t0.Unix() + 60, "grps": []string{"g"}, "tps": []string{"orders"}}
	for _, tc := range []struct {
		name string
		op   []string
		want error
	}{
		{"fetch in a client credential", []string{"consume", "fetch"}, ErrUnknownOp},
		{"commit in a client credential", []string{"commit"}, ErrUnknownOp},
		{"made-up op", []string{"consume", "admin"}, ErrUnknownOp},
		{"produce without consume", []string{"produce"}, ErrBadClaims},
		{"empty op list", []string{}, nil}, // the same as no claim: consume
	} {
		_, err := f.v.Verify(craft(priv, h, with(claims, "op", tc.op)), KindClient, t0)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := f.v.Verify(craft(priv, capHeader(kid), with(capClaims(), "op", []string{"fetch", "consume"})), KindCapability, t0); !errors.Is(err, ErrUnknownOp) {
		t.Fatalf("consume in a capability: %v, want ErrUnknownOp", err)
	}
	bad := base
	bad.Ops = Ops(OpProduce)
	if _, _, err := f.minter.Mint(KindClient, bad, t0, time.Hour); !errors.Is(err, ErrBadClaims) {
		t.Fatalf("minting produce without consume: %v, want ErrBadClaims", err)
	}
}
