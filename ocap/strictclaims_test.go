package ocap

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestTokenDecodingIsStrict is redteam6 #4: signed with the real key,
// each token was served as another reader would not read it — claim
// names matched in any case ("TP" as tp: `capgate token inspect` showed
// tp "other" while the gateway served topic "demo"), the last of
// duplicate claims won, and so did the last of duplicate header keys
// ({"alg":"none","alg":"EdDSA"} read as EdDSA). Each is refused now, and
// the reason names the key.
func TestTokenDecodingIsStrict(t *testing.T) {
	f := newFixture(t)
	priv, kid := f.ring.Current.Private, f.ring.Current.ID
	h := mustJSON(capHeader(kid))
	body := strings.TrimSuffix(mustJSON(capClaims()), "}")
	noTopic := strings.TrimSuffix(mustJSON(with(capClaims(), "tp", nil)), "}")
	noGroup := strings.TrimSuffix(mustJSON(with(capClaims(), "grp", nil, "ep", nil)), "}")
	for _, tc := range []struct {
		name, header, claims string
		want                 error
		says                 string
	}{
		{"TP for tp", h, noTopic + `,"TP":"orders"}`, ErrBadClaims, `unknown claim "TP" (did you mean "tp"?)`},
		{"GRP and Ep for grp and ep", h, noGroup + `,"GRP":"billing","Ep":7}`, ErrBadClaims, `unknown claim "GRP"`},
		{"tp other, then TP", h, body + `,"TP":"demo"}`, ErrBadClaims, `unknown claim "TP"`},
		{"pt twice", h, body + `,"pt":1}`, ErrBadClaims, `duplicate claim "pt"`},
		{"op twice, the last wider", h, body + `,"op":["fetch","commit","produce"]}`, ErrBadClaims, `duplicate claim "op"`},
		{"qos key in another case", h, body + `,"qos":{"BPS":1}}`, ErrBadClaims, `unknown claim "BPS"`},
		{"alg none, then EdDSA", `{"alg":"none","kid":"` + kid + `","typ":"capgate+jwt","alg":"EdDSA"}`, body + `}`, ErrForbiddenHeader, `duplicate header "alg"`},
		{"typ twice", `{"alg":"EdDSA","kid":"` + kid + `","typ":"capgate-client+jwt","typ":"capgate+jwt"}`, body + `}`, ErrForbiddenHeader, `duplicate header "typ"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.v.Verify(craftRaw(priv, tc.header, tc.claims), KindCapability, t0)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Verify = %+v, %v; want %v saying %s", got, err, tc.want, tc.says)
			}
		})
	}
	// The canonical token still verifies.
	if _, err := f.v.Verify(craftRaw(priv, h, body+`}`), KindCapability, t0); err != nil {
		t.Fatal(err)
	}
}

// TestCaveatsFailClosed is redteam6 #3: cav is reserved for caveats no
// verifier enforces yet, and a token carrying one was served as if it
// had none — a caveat is a restriction, so it failed open. Any cav is
// refused now (null and an empty list too: only an absent claim means
// "no caveats"), and the minter will not sign one.
func TestCaveatsFailClosed(t *testing.T) {
	f := newFixture(t)
	priv, kid := f.ring.Current.Private, f.ring.Current.ID
	body := strings.TrimSuffix(mustJSON(capClaims()), "}")
	for _, cav := range []string{`[{"max_offset":0,"deny":true}]`, `[]`, `null`, `{}`} {
		token := craftRaw(priv, mustJSON(capHeader(kid)), body+`,"cav":`+cav+`}`)
		got, err := f.v.Verify(token, KindCapability, t0)
		if !errors.Is(err, ErrBadClaims) || !strings.Contains(err.Error(), "claim cav") {
			t.Errorf("cav %s: Verify = %+v, %v; want ErrBadClaims naming cav", cav, got, err)
		}
	}
	client := craftRaw(priv, mustJSON(map[string]any{"alg": "EdDSA", "kid": kid, "typ": string(KindClient)}),
		`{"iss":"coord-1","aud":"prod-eu","sub":"svc","jti":"AAAAAAAAAAAAAAAAAAAAAA","iat":`+itoa(t0.Unix())+`,"exp":`+itoa(t0.Unix()+60)+`,"grps":["*"],"cav":[1]}`)
	if _, err := f.v.Verify(client, KindClient, t0); !errors.Is(err, ErrBadClaims) {
		t.Errorf("client credential with cav: %v, want ErrBadClaims", err)
	}
	_, _, err := f.minter.Mint(KindCapability, Claims{Subject: "m", Topic: "orders", Partition: part(0), Ops: Ops(OpFetch), Caveats: []byte(`[1]`)}, t0, time.Minute)
	if !errors.Is(err, ErrBadClaims) {
		t.Errorf("Mint with caveats: %v, want ErrBadClaims", err)
	}
}

// TestOffsetRangeCannotProduce is redteam6 #5: a fetch+produce
// capability attenuated to offsets [0, 2) still wrote at 2, 3, … (the
// range bounds reads; a write's offset is the broker's). A capability
// never carries both now: the attenuation is refused unless it drops
// produce, the minter will not sign one, and the verifier refuses one
// signed before.
func TestOffsetRangeCannotProduce(t *testing.T) {
	f := newFixture(t)
	parentTok, _, err := f.minter.Mint(KindCapability, Claims{Subject: "rtp", Topic: "demo", Partition: part(4), Ops: Ops(OpFetch | OpProduce)}, t0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	parent, err := f.v.Verify(parentTok, KindCapability, t0)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = Attenuate(parent, Attenuation{Offsets: &OffsetRange{From: 0, To: 2}}, t0)
	if !errors.Is(err, ErrBadOffsetRange) || !strings.Contains(err.Error(), "drop produce") {
		t.Fatalf("attenuate to [0, 2) keeping produce: %v, want ErrBadOffsetRange saying to drop produce", err)
	}
	child, ttl, err := Attenuate(parent, Attenuation{Ops: Ops(OpFetch), Offsets: &OffsetRange{From: 0, To: 2}}, t0)
	if err != nil {
		t.Fatalf("attenuate to fetch on [0, 2): %v", err)
	}
	if _, _, err := f.minter.Mint(KindCapability, child, t0, ttl); err != nil {
		t.Fatalf("mint the fetch-only child: %v", err)
	}
	_, _, err = f.minter.Mint(KindCapability, Claims{Subject: "rtp", Topic: "demo", Partition: part(4), Ops: Ops(OpFetch | OpProduce), Offsets: &OffsetRange{From: 0, To: 2}}, t0, time.Minute)
	if !errors.Is(err, ErrBadOffsetRange) {
		t.Fatalf("mint produce on [0, 2): %v, want ErrBadOffsetRange", err)
	}
	forged := craft(f.ring.Current.Private, capHeader(f.ring.Current.ID), with(capClaims(), "op", []string{"fetch", "produce"}, "off", []int64{0, 2}))
	if got, err := f.v.Verify(forged, KindCapability, t0); !errors.Is(err, ErrBadOffsetRange) {
		t.Fatalf("verify produce on [0, 2): %+v, %v; want ErrBadOffsetRange", got, err)
	}
}
