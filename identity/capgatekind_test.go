package identity_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
	"github.com/capgate/capgate/ocap"
)

// capgateToken is a JWT shaped like capgate's own (header typ, iss),
// unsigned: Unconfigured and Handles read it without verifying.
func capgateToken(typ, iss string) []byte {
	enc := base64.RawURLEncoding.EncodeToString
	return []byte(enc([]byte(`{"alg":"EdDSA","kid":"k1","typ":"`+typ+`"}`)) + "." +
		enc([]byte(`{"iss":"`+iss+`","sub":"x","grps":["*"],"tps":["*"]}`)) + ".c2ln")
}

// TestCapgateTokenOfAnotherCoordinator (redteam5 #5): a capgate client
// credential minted by another coordinator was explained as "issuer X is
// not a configured OIDC issuer (none is configured)": the issuer routing
// never looked at the token's type. A token typed as capgate's is now
// named as what it is, with its issuer and the coordinator's own, and is
// never handed to an IdP's verifier, even under a configured issuer's
// iss; its own coordinator's tokens are left to capgate's verifier.
func TestCapgateTokenOfAnotherCoordinator(t *testing.T) {
	none := newVerifier(t, identity.DefaultConfig())
	for typ, noun := range map[ocap.Kind]string{ocap.KindClient: "a capgate client credential", ocap.KindMember: "a capgate member token",
		ocap.KindCapability: "a capgate capability"} {
		err := none.Unconfigured(capgateToken(string(typ), "rt5-coord"), "capgate-coordinator")
		want := noun + ` of issuer "rt5-coord"; this coordinator is "capgate-coordinator": minted by another coordinator or cluster`
		if !errors.Is(err, identity.ErrInvalid) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "OIDC") {
			t.Errorf("%s of another coordinator: %v, want %q", typ, err, want)
		}
	}
	if err := none.Unconfigured(capgateToken(string(ocap.KindClient), "capgate-coordinator"), "capgate-coordinator"); err != nil {
		t.Errorf("own client credential: %v, want nil (capgate's verifier decides)", err)
	}
	is := idptest.New(t, "EdDSA")
	v := newVerifier(t, config(is))
	if v.Handles(capgateToken(string(ocap.KindClient), is.URL)) {
		t.Error("a token typed capgate-client+jwt under a configured issuer's iss went to the IdP's verifier")
	}
	if err := v.Unconfigured(capgateToken("JWT", "https://elsewhere.example"), "capgate-coordinator"); err == nil || !strings.Contains(err.Error(), "not a configured OIDC issuer") {
		t.Errorf("an IdP token of another issuer: %v, want the OIDC explanation", err)
	}
	if _, ok := identity.CapgateKind([]byte(strings.Repeat("e", 2000) + ".e30.c2ln")); ok {
		t.Error("a header over the bound was decoded")
	}
}
