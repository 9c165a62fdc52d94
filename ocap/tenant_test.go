package ocap

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestTenantClaim: a capability carries tnt (the tenant it was granted
// to) through verification and attenuation; a tnt in a client
// credential or a member token, or one over 255 bytes, is refused as
// malformed claims.
func TestTenantClaim(t *testing.T) {
	f := newFixture(t)
	priv, kid := f.ring.Current.Private, f.ring.Current.ID
	c, err := f.v.Verify(craft(priv, capHeader(kid), with(capClaims(), "tnt", "oauth:svc")), KindCapability, t0)
	if err != nil || c.Tenant != "oauth:svc" {
		t.Fatalf("capability with tnt: %v, tnt %q", err, c.Tenant)
	}
	child, _, err := Attenuate(c, Attenuation{}, t0)
	if err != nil || child.Tenant != "oauth:svc" {
		t.Fatalf("attenuated child: %v, tnt %q (the parent's dropped)", err, child.Tenant)
	}
	if _, err := f.v.Verify(craft(priv, capHeader(kid), with(capClaims(), "tnt", strings.Repeat("t", 256))), KindCapability, t0); !errors.Is(err, ErrBadClaims) {
		t.Fatalf("a 256-byte tnt: %v, want ErrBadClaims", err)
	}
	tok, _, err := f.minter.Mint(KindClient, Claims{Subject: "svc", Groups: []string{"g"}, Tenant: "other"}, t0, time.Hour)
	if err == nil {
		_, err = f.v.Verify(tok, KindClient, t0)
	}
	if !errors.Is(err, ErrBadClaims) {
		t.Fatalf("a client credential with tnt: %v, want ErrBadClaims", err)
	}
}
