package ocap

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// foreignWording is golang-jwt's and encoding/json's, which reached 401
// bodies and SASL errors: "token is unverifiable: error while executing
// keyfunc: ocap: wrong token type…", "Go struct field Claims.pt of type
// int32".
var foreignWording = []string{"token is ", "keyfunc", "could not", "token has invalid", "Go struct", "Go value", "json:", "interface {}", "illegal base64"}

// TestReasonsSayWhatIsWrong: the reasons people act on say it in
// capgate's terms — what the token is and what was wanted, which key,
// which claim, when — and still match their sentinel.
func TestReasonsSayWhatIsWrong(t *testing.T) {
	f := newFixture(t)
	priv, kid := f.ring.Current.Private, f.ring.Current.ID
	h, c := capHeader(kid), capClaims()
	good := craft(priv, h, c)
	parts := strings.Split(good, ".")
	client, _, err := f.minter.Mint(KindClient, Claims{Subject: "svc", Groups: []string{"billing"}}, t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, token string
		now         time.Time
		want        error
		text        string
	}{
		{"client credential as capability", client, t0, ErrBadType,
			`ocap: wrong token type: a client credential (typ "capgate-client+jwt"), want a capability (typ "capgate+jwt")`},
		{"tampered", parts[0] + "." + enc(with(c, "pt", 4)) + "." + parts[2], t0, ErrBadSignature,
			"ocap: bad signature: the signature does not match the token under key " + kid},
		{"unknown kid", craft(priv, with(h, "kid", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), c), t0, ErrUnknownKid,
			"ocap: unknown kid: AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA is not among this verifier's"},
		{"expired", good, t0.Add(3 * time.Minute), ErrExpired, "ocap: token expired: exp 2027-01-15T08:01:00Z, 2m ago"},
		{"wrong issuer", craft(priv, h, with(c, "iss", "coord-2")), t0, ErrBadIssuer, `ocap: wrong issuer: "coord-2", want "coord-1"`},
		{"2 segments", parts[0] + "." + parts[1], t0, ErrMalformed, "ocap: malformed token: 3 dot-separated segments (header.claims.signature) expected, got 2"},
		{"partition 2^31", craft(priv, h, with(c, "pt", int64(1)<<31)), t0, ErrBadClaims, "ocap: malformed claims: claim \"pt\": want an integer from -2147483648 to 2147483647, got the number 2147483648"},
		{"unknown claim", craft(priv, h, with(c, "admin", true)), t0, ErrBadClaims, `ocap: malformed claims: unknown claim "admin"`},
	} {
		_, err := f.v.Verify(tc.token, KindCapability, tc.now)
		if !errors.Is(err, tc.want) || !strings.HasPrefix(fmtErr(err), tc.text) {
			t.Errorf("%s: %v\nwant %v, starting %q", tc.name, err, tc.want, tc.text)
		}
	}
}

// TestMintReasonsSayItOnce: "mint: ocap: mint: ocap: missing or
// malformed topic" — the caller's "mint:", then Mint's own, then the
// check's "ocap:" again. Mint says why, once; callers say what they
// minted.
func TestMintReasonsSayItOnce(t *testing.T) {
	f := newFixture(t)
	for name, mint := range map[string]func() error{
		"bad topic": func() error {
			_, _, err := f.minter.Mint(KindCapability, Claims{Subject: "m", Topic: "a/b", Partition: part(0), Ops: Ops(OpFetch)}, t0, time.Minute)
			return err
		},
		"lease": func() error {
			_, _, err := f.minter.Mint(KindCapability, Claims{Subject: "m", Topic: "t", Partition: part(0), Ops: Ops(OpFetch)}, t0, time.Hour)
			return err
		},
	} {
		err := mint()
		if err == nil || strings.Count(err.Error(), "ocap:") != 1 || strings.Contains(err.Error(), "mint") {
			t.Errorf("%s: %v, want one ocap: and no mint", name, err)
		}
	}
	_, _, err := f.minter.Mint(KindCapability, Claims{Subject: "m", Topic: "a/b", Partition: part(0), Ops: Ops(OpFetch)}, t0, time.Minute)
	if !errors.Is(err, ErrBadTopic) {
		t.Errorf("mint error %v does not match ErrBadTopic", err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
