package identity_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
)

func config(issuers ...*idptest.Issuer) identity.Config {
	cfg := identity.DefaultConfig()
	for _, is := range issuers {
		cfg.Issuers = append(cfg.Issuers, identity.IssuerConfig{
			Issuer: is.URL, CAFile: is.CAFile, Audiences: []string{"capgate"},
			Rules: []identity.Rule{
				{Claim: "groups", Value: "kafka-billing", Groups: []string{"billing-*"}, Topics: []string{"invoices"}},
				{Claim: "scope", Value: "capgate:audit", Groups: []string{"audit"}, Topics: []string{"*"}},
				{Claim: "realm_access.roles", Value: "ops-*", Groups: []string{"ops"}, Topics: []string{"ops-events"}},
			},
		})
	}
	return cfg
}

func newVerifier(t *testing.T, cfg identity.Config) *identity.Verifier {
	t.Helper()
	v, err := identity.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func claims(now time.Time, extra idptest.Claims) idptest.Claims {
	c := idptest.Claims{"sub": "svc-billing", "aud": "capgate", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

// TestMappingAcrossAlgorithms: RS256, ES256 and EdDSA issuers, discovery
// over HTTPS with the issuer's own CA; each rule kind maps (an array
// claim, a space-separated scope, a dotted custom claim with a prefix
// value); the identity id is stable per issuer and subject.
func TestMappingAcrossAlgorithms(t *testing.T) {
	now := time.Now()
	for _, alg := range []string{"RS256", "ES256", "EdDSA"} {
		is := idptest.New(t, alg)
		v := newVerifier(t, config(is))
		for _, c := range []struct {
			extra          idptest.Claims
			groups, topics []string
		}{
			{idptest.Claims{"groups": []string{"kafka-billing", "staff"}}, []string{"billing-*"}, []string{"invoices"}},
			{idptest.Claims{"scope": "openid capgate:audit"}, []string{"audit"}, []string{"*"}},
			{idptest.Claims{"realm_access": map[string]any{"roles": []string{"ops-oncall"}}, "scope": "capgate:audit"}, []string{"audit", "ops"}, []string{"*", "ops-events"}},
		} {
			token := is.Token(claims(now, c.extra))
			if !v.Handles([]byte(token)) {
				t.Fatalf("%s: Handles = false for the issuer's token", alg)
			}
			id, err := v.Verify(context.Background(), token, now)
			if err != nil {
				t.Fatalf("%s %v: %v", alg, c.extra, err)
			}
			if !slices.Equal(id.Groups, c.groups) || !slices.Equal(id.Topics, c.topics) || id.Subject != "svc-billing" || id.Issuer != is.URL {
				t.Errorf("%s %v: %+v, want groups %v topics %v", alg, c.extra, id, c.groups, c.topics)
			}
			if id.ID != identity.IdentityID(is.URL, "svc-billing") || len(id.ID) != 22 {
				t.Errorf("%s: id %q", alg, id.ID)
			}
		}
		if got := is.DiscoveryFetches.Load(); got != 1 {
			t.Errorf("%s: %d discovery fetches, want 1 (cached)", alg, got)
		}
	}
}

// TestRefused: every way a token must fail, with the error the
// coordinator turns into its code (ErrExpired → token_expired,
// ErrUnmapped → forbidden, ErrInvalid → unauthorized).
func TestRefused(t *testing.T) {
	now := time.Now()
	is := idptest.New(t, "RS256")
	other := idptest.New(t, "RS256")
	v := newVerifier(t, config(is))
	good := claims(now, idptest.Claims{"groups": []string{"kafka-billing"}})
	with := func(k string, val any) idptest.Claims {
		c := claims(now, idptest.Claims{"groups": []string{"kafka-billing"}})
		c[k] = val
		return c
	}
	pubPEM := func() []byte {
		der, _ := x509.MarshalPKIXPublicKey(is.SigningKey().Public())
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}
	hs256 := func() string { // alg confusion: HMAC keyed with the published public key
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, good)
		tok.Header["kid"] = is.SigningKey().Kid
		s, _ := tok.SignedString(pubPEM())
		return s
	}
	none := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodNone, good)
		tok.Header["kid"] = is.SigningKey().Kid
		s, _ := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
		return s
	}
	for _, c := range []struct {
		name  string
		token string
		want  error
	}{
		{"wrong issuer", other.Token(claims(now, idptest.Claims{"groups": []string{"kafka-billing"}})), identity.ErrInvalid},
		{"configured issuer, another IdP's key", other.TokenWith(other.SigningKey(), with("iss", is.URL)), identity.ErrInvalid},
		{"wrong audience", is.Token(with("aud", "someone-else")), identity.ErrInvalid},
		{"no audience", is.Token(func() idptest.Claims { c := with("x", 1); delete(c, "aud"); return c }()), identity.ErrInvalid},
		{"expired", is.Token(with("exp", now.Add(-time.Minute).Unix())), identity.ErrExpired},
		{"no exp", is.Token(func() idptest.Claims { c := with("x", 1); delete(c, "exp"); return c }()), identity.ErrInvalid},
		{"not valid yet", is.Token(with("nbf", now.Add(time.Hour).Unix())), identity.ErrInvalid},
		{"unknown kid", is.TokenWith(mustKey(t, "k-unknown", "RS256"), good), identity.ErrInvalid},
		{"alg confusion HS256 with the JWKS key", hs256(), identity.ErrInvalid},
		{"alg none", none(), identity.ErrInvalid},
		{"group outside the mapping", is.Token(with("groups", []string{"finance"})), identity.ErrUnmapped},
		{"no sub", is.Token(func() idptest.Claims { c := with("x", 1); delete(c, "sub"); return c }()), identity.ErrInvalid},
		{"oversized", is.Token(with("pad", strings.Repeat("x", 20<<10))), identity.ErrInvalid},
	} {
		_, err := v.Verify(context.Background(), c.token, now)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		t.Logf("%s: %v", c.name, err)
	}
	// A P-256 key published beside the RSA key: an RS256 token naming
	// the P-256 kid is refused (a key serves one algorithm).
	rsaKey := is.SigningKey()
	ec, err := is.Rotate("k-ec", "ES256", true)
	if err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Hour) // past jwks_refresh_min: the new kid is fetched
	fresh := claims(later, idptest.Claims{"groups": []string{"kafka-billing"}})
	if _, err := v.Verify(context.Background(), is.TokenAs(rsaKey, ec.Kid, fresh), later); !errors.Is(err, identity.ErrInvalid) || !strings.Contains(err.Error(), "ES256 key") {
		t.Errorf("RS256 token under an ES256 kid: %v", err)
	}
	if _, err := v.Verify(context.Background(), is.TokenWith(ec, fresh), later); err != nil {
		t.Errorf("the ES256 key itself: %v", err)
	}
}

func mustKey(t *testing.T, kid, alg string) *idptest.Key {
	t.Helper()
	k, err := idptest.NewKey(kid, alg)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestKeyRotationAndRefreshLimit: the issuer rotates its key mid-test; a
// token under the new kid triggers one refresh and verifies; tokens under
// made-up kids within jwks_refresh_min cause no fetch at all; after the
// interval one more; the retired kid is refused once the set no longer
// has it.
func TestKeyRotationAndRefreshLimit(t *testing.T) {
	t0 := time.Now()
	is := idptest.New(t, "ES256")
	cfg := config(is)
	cfg.JWKSRefreshMin = 30 * time.Second
	v := newVerifier(t, cfg)
	mapped := func(at time.Time) idptest.Claims {
		return claims(at, idptest.Claims{"groups": []string{"kafka-billing"}})
	}
	old := is.SigningKey()
	if _, err := v.Verify(context.Background(), is.Token(mapped(t0)), t0); err != nil {
		t.Fatal(err)
	}
	if got := is.JWKSFetches.Load(); got != 1 {
		t.Fatalf("%d JWKS fetches after the first token, want 1", got)
	}
	// Made-up kids right away: within the interval, no fetch.
	t1 := t0.Add(time.Second)
	for i := range 50 {
		tok := is.TokenWith(mustKey(t, "forged-"+string(rune('a'+i%26)), "ES256"), mapped(t1))
		if _, err := v.Verify(context.Background(), tok, t1); !errors.Is(err, identity.ErrInvalid) {
			t.Fatalf("forged kid: %v", err)
		}
	}
	if got := is.JWKSFetches.Load(); got != 1 {
		t.Fatalf("50 unknown kids within jwks_refresh_min caused %d fetches, want none beyond the first", got-1)
	}
	// Rotation: the new kid is refused until the interval passed (no
	// refresh allowed yet), then fetched once and accepted.
	rotated, err := is.Rotate("k2", "EdDSA", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), is.Token(mapped(t1)), t1); !errors.Is(err, identity.ErrInvalid) {
		t.Fatalf("the new kid within the interval: %v (the last fetch was %s ago)", err, t1.Sub(t0))
	}
	t2 := t0.Add(cfg.JWKSRefreshMin)
	if _, err := v.Verify(context.Background(), is.Token(mapped(t2)), t2); err != nil {
		t.Fatalf("the rotated key %s after the interval: %v", rotated.Kid, err)
	}
	if got := is.JWKSFetches.Load(); got != 2 {
		t.Fatalf("%d fetches after the rotation, want 2", got)
	}
	// The old key is gone from the set: its tokens are refused.
	if _, err := v.Verify(context.Background(), is.TokenWith(old, mapped(t2)), t2); !errors.Is(err, identity.ErrInvalid) {
		t.Fatalf("token of the retired key: %v", err)
	}
}

// TestJWKSFetchBounded: a key set larger than max_jwks_bytes and an
// issuer slower than fetch_timeout both fail the fetch (the token is
// refused, the previous keys — here none — stay), within the timeout.
func TestJWKSFetchBounded(t *testing.T) {
	now := time.Now()
	big := idptest.New(t, "RS256")
	big.ServeOversizedJWKS(64 << 10)
	cfg := config(big)
	cfg.MaxJWKSBytes = 16 << 10
	v := newVerifier(t, cfg)
	if _, err := v.Verify(context.Background(), big.Token(claims(now, idptest.Claims{"groups": []string{"kafka-billing"}})), now); !errors.Is(err, identity.ErrInvalid) {
		t.Fatalf("oversized key set: %v", err)
	}
	slow := idptest.New(t, "RS256")
	slow.Delay(time.Minute)
	cfg = config(slow)
	cfg.FetchTimeout = 200 * time.Millisecond
	v = newVerifier(t, cfg)
	start := time.Now()
	_, err := v.Verify(context.Background(), slow.Token(claims(now, idptest.Claims{"groups": []string{"kafka-billing"}})), now)
	if !errors.Is(err, identity.ErrInvalid) {
		t.Fatalf("slow issuer: %v", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("a fetch against a 1-minute-slow issuer took %s with fetch_timeout 200ms", took)
	}
	slow.Delay(0) // let the server close
}

func TestConfigRefusesPlainHTTP(t *testing.T) {
	cfg := identity.DefaultConfig()
	cfg.Issuers = []identity.IssuerConfig{{Issuer: "http://idp.example", Audiences: []string{"a"}, Rules: []identity.Rule{{Claim: "groups", Value: "x", Groups: []string{"g"}}}}}
	if err := cfg.Validate("oidc"); err == nil || !strings.Contains(err.Error(), "oidc.issuers[0].issuer") {
		t.Fatalf("http issuer: %v", err)
	}
	cfg.Issuers[0].Issuer, cfg.Issuers[0].JWKSURL = "https://idp.example", "http://idp.example/certs"
	if err := cfg.Validate("oidc"); err == nil || !strings.Contains(err.Error(), "jwks_url") {
		t.Fatalf("http jwks_url: %v", err)
	}
	cfg.Issuers[0].JWKSURL, cfg.Issuers[0].Algorithms = "", []string{"HS256"}
	if err := cfg.Validate("oidc"); err == nil || !strings.Contains(err.Error(), "algorithms") {
		t.Fatalf("HS256 allowed: %v", err)
	}
}

// TestConcurrentVerify: verifications from many goroutines while the
// issuer rotates (old keys kept) all succeed, and the key set is fetched
// once per rotation at most (run under -race in CI).
func TestConcurrentVerify(t *testing.T) {
	now := time.Now()
	is := idptest.New(t, "EdDSA")
	cfg := config(is)
	cfg.JWKSRefreshMin = time.Nanosecond // the clock is the real one here: every unknown kid may refresh
	v := newVerifier(t, cfg)
	tokens := make(chan string, 64)
	done := make(chan error, 8)
	for range 8 {
		go func() {
			var first error
			for tok := range tokens { // drain even after a failure
				if _, err := v.Verify(context.Background(), tok, time.Now()); err != nil && first == nil {
					first = err
				}
			}
			done <- first
		}()
	}
	for i := range 5 {
		for range 40 {
			tokens <- is.Token(claims(now, idptest.Claims{"groups": []string{"kafka-billing"}}))
		}
		if _, err := is.Rotate(fmt.Sprintf("k%d", i+2), "EdDSA", true); err != nil {
			t.Fatal(err)
		}
	}
	close(tokens)
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if fetches := is.JWKSFetches.Load(); fetches > 6 {
		t.Fatalf("%d JWKS fetches for 5 rotations", fetches)
	}
}

// TestConsoleAdmin: a token matching the issuer's console_admins is an
// operator; one that verifies but matches none is ErrUnmapped (even when
// its rules let it join groups), and every verification failure is
// refused as in Verify. A console-only issuer's tokens join nothing.
func TestConsoleAdmin(t *testing.T) {
	now := time.Now()
	is := idptest.New(t, "ES256")
	cfg := config(is)
	cfg.Issuers[0].ConsoleAdmins = []identity.Match{{Claim: "realm_access.roles", Value: "capgate-admin"}}
	v := newVerifier(t, cfg)
	admin := claims(now, idptest.Claims{"realm_access": map[string]any{"roles": []string{"capgate-admin"}}})
	id, err := v.ConsoleAdmin(context.Background(), is.Token(admin), now)
	if err != nil || id.ID != identity.IdentityID(is.URL, "svc-billing") || id.ExpiresAt.Unix() != now.Add(time.Hour).Unix() {
		t.Fatalf("console admin: %+v, %v", id, err)
	}
	member := claims(now, idptest.Claims{"groups": []string{"kafka-billing"}})
	if _, err := v.ConsoleAdmin(context.Background(), is.Token(member), now); !errors.Is(err, identity.ErrUnmapped) {
		t.Fatalf("a member's token at the console: %v, want ErrUnmapped", err)
	}
	if _, err := v.ConsoleAdmin(context.Background(), is.Token(func() idptest.Claims { admin["aud"] = "other"; return admin }()), now); !errors.Is(err, identity.ErrInvalid) {
		t.Fatalf("an admin token for another audience: %v, want ErrInvalid", err)
	}
	only := identity.DefaultConfig()
	only.Issuers = []identity.IssuerConfig{{Issuer: is.URL, CAFile: is.CAFile, Audiences: []string{"capgate"},
		ConsoleAdmins: []identity.Match{{Claim: "groups", Value: "ops"}}}}
	v2 := newVerifier(t, only)
	ops := is.Token(claims(now, idptest.Claims{"groups": []string{"ops"}}))
	if _, err := v2.ConsoleAdmin(context.Background(), ops, now); err != nil {
		t.Fatalf("console-only issuer, admin: %v", err)
	}
	if _, err := v2.Verify(context.Background(), ops, now); !errors.Is(err, identity.ErrUnmapped) {
		t.Fatalf("console-only issuer, join: %v, want ErrUnmapped", err)
	}
	bad := only
	bad.Issuers = []identity.IssuerConfig{{Issuer: is.URL, Audiences: []string{"capgate"}, ConsoleAdmins: []identity.Match{{Claim: "groups"}}}}
	if err := bad.Validate("oidc"); err == nil || !strings.Contains(err.Error(), "console_admins[0].value") {
		t.Fatalf("empty console_admins value: %v", err)
	}
}

// TestConfigRefusesStarInsideNames: a rule's groups and topics are the
// patterns client credentials take (exact, *, prefix*); a "*" elsewhere
// is refused, as POST /v1/admin/clients refuses it.
func TestConfigRefusesStarInsideNames(t *testing.T) {
	for _, r := range []identity.Rule{
		{Claim: "groups", Value: "x", Groups: []string{"bill*ing"}},
		{Claim: "groups", Value: "x", Groups: []string{"billing-*"}, Topics: []string{"inv*oices"}},
	} {
		cfg := identity.DefaultConfig()
		cfg.Issuers = []identity.IssuerConfig{{Issuer: "https://idp.example", Audiences: []string{"a"}, Rules: []identity.Rule{r}}}
		if err := cfg.Validate("oidc"); err == nil || !strings.Contains(err.Error(), "only at the end") {
			t.Fatalf("rule %+v: %v", r, err)
		}
	}
	cfg := identity.DefaultConfig()
	cfg.Issuers = []identity.IssuerConfig{{Issuer: "https://idp.example", Audiences: []string{"a"},
		Rules: []identity.Rule{{Claim: "groups", Value: "x", Groups: []string{"billing-*", "*", "audit"}, Topics: []string{"inv-*", "*"}}}}}
	if err := cfg.Validate("oidc"); err != nil {
		t.Fatalf("prefix patterns refused: %v", err)
	}
}

// TestOnlyScopeClaimsAreSplit: a string claim is a space-delimited list
// only when it is an OAuth scope (scope, scp). Before, every string claim
// was split, so a holder who could write "staff kafka-billing" into a
// free-text claim matched a rule on the value kafka-billing.
func TestOnlyScopeClaimsAreSplit(t *testing.T) {
	now := time.Now()
	is := idptest.New(t, "RS256")
	v := newVerifier(t, config(is))
	for _, extra := range []idptest.Claims{
		{"groups": "staff kafka-billing"},
		{"realm_access": map[string]any{"roles": "staff ops-oncall"}},
	} {
		if id, err := v.Verify(context.Background(), is.Token(claims(now, extra)), now); !errors.Is(err, identity.ErrUnmapped) {
			t.Errorf("%v: %+v, %v; want ErrUnmapped", extra, id, err)
		}
	}
	for _, extra := range []idptest.Claims{
		{"groups": "kafka-billing"}, // one value, as a string
		{"scope": "openid capgate:audit"},
	} {
		if _, err := v.Verify(context.Background(), is.Token(claims(now, extra)), now); err != nil {
			t.Errorf("%v: %v", extra, err)
		}
	}
}

// TestUnconfigured: only a token naming an issuer that is neither the
// caller's own nor configured is explained; the configured issuer's
// tokens, own's, tokens without an iss and non-JWTs are left to their
// verifiers.
func TestUnconfigured(t *testing.T) {
	now := time.Now()
	is := idptest.New(t, "EdDSA")
	v := newVerifier(t, config(is))
	with := func(iss any) string {
		c := claims(now, nil)
		c["iss"] = iss // nil: "iss":null
		return is.Token(c)
	}
	for _, tok := range []string{with(is.URL), with("capgate-coordinator"), with(nil), with(7), "not a jwt", "a.b.c"} {
		if err := v.Unconfigured([]byte(tok), "capgate-coordinator"); err != nil {
			t.Errorf("%.40s…: %v, want nil", tok, err)
		}
	}
	if err := v.Unconfigured([]byte(with(is.URL+"/")), "capgate-coordinator"); !errors.Is(err, identity.ErrInvalid) || !strings.Contains(err.Error(), "trailing slash") {
		t.Errorf("trailing slash: %v", err)
	}
	none := newVerifier(t, identity.DefaultConfig())
	if err := none.Unconfigured([]byte(with(is.URL)), "capgate-coordinator"); err == nil || !strings.Contains(err.Error(), "none is configured") {
		t.Errorf("no issuer configured: %v", err)
	}
}

// TestUnmappedRefusalIsBounded: the refusal of a token no rule maps
// quotes what it holds in the rules' claims (dayone2), at most 8 values
// of 64 characters each, however many the IdP wrote; it stays
// ErrUnmapped.
func TestUnmappedRefusalIsBounded(t *testing.T) {
	now := time.Now()
	is := idptest.New(t, "RS256")
	v := newVerifier(t, config(is))
	groups := []string{}
	for i := range 40 {
		groups = append(groups, fmt.Sprintf("directory-group-%03d-%s", i, strings.Repeat("x", 200)))
	}
	_, err := v.Verify(context.Background(), is.Token(claims(now, idptest.Claims{"groups": groups, "scope": "openid email"})), now)
	if !errors.Is(err, identity.ErrUnmapped) {
		t.Fatalf("a token of 40 unmapped groups: %v, want ErrUnmapped", err)
	}
	msg := err.Error()
	for _, want := range []string{"and 32 more", `scope: ["openid" "email"]`, "realm_access.roles: absent"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("refusal %q, want it to say %q", msg, want)
		}
	}
	if strings.Contains(msg, "directory-group-008") || len(msg) > 2048 {
		t.Fatalf("refusal of %d bytes quotes past 8 values: %q", len(msg), msg)
	}
}
