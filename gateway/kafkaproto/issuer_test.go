package kafkaproto

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"go.uber.org/zap"

	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
	"github.com/capgate/capgate/internal/failguard"
	"github.com/capgate/capgate/ocap"
)

// foreignJWT is an IdP-shaped token (typ JWT, an RSA-style kid, claims
// capgate does not know) claiming iss; the signature does not matter:
// nothing verifies it.
func foreignJWT(t *testing.T, iss, typ string) string {
	t.Helper()
	claims := jwt.MapClaims{"iss": iss, "sub": "svc-billing", "aud": "capgate", "groups": []string{"kafka-billing"},
		"exp": time.Now().Add(time.Hour).Unix()}
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	tok.Header["kid"] = "idp-key-1"
	if typ != "" {
		tok.Header["typ"] = typ
	}
	s, err := tok.SignedString([]byte("not a capgate key, not an IdP's either"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// saslError is what a kgo client authenticating to addr with token (over
// OAUTHBEARER, or PLAIN as the password) gets.
func saslError(t *testing.T, addr, token string, usePlain bool) error {
	t.Helper()
	var mech sasl.Mechanism = oauth.Oauth(func(context.Context) (oauth.Auth, error) { return oauth.Auth{Token: token}, nil })
	if usePlain {
		mech = plain.Auth{User: "capgate", Pass: token}.AsMechanism()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(mech), kgo.RetryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

// TestUnconfiguredIssuerNamedAtSASL: a kgo client authenticating over
// SASL (OAUTHBEARER and PLAIN) with a JWT of an OIDC issuer the listener
// is not configured for reads, in SASL_AUTHENTICATION_FAILED's message,
// that the issuer is not configured — naming the token's iss and
// gateway.kafka_oidc.issuers, a configured issuer it misses only by a
// trailing slash, or that none is configured — and nothing else of the
// token; before, it read capgate's verifier's refusal of a capgate token.
// A capgate-typed token keeps the verifier's refusal, and so does an
// address whose failure budget is spent.
func TestUnconfiguredIssuerNamedAtSASL(t *testing.T) {
	none := startListener(t, testConfig(), nil, zap.NewNop())
	cfg := testConfig()
	cfg.OIDC = identity.DefaultConfig()
	cfg.OIDC.Issuers = []identity.IssuerConfig{{Issuer: "https://idp.example/realms/prod", Audiences: []string{"capgate"},
		Rules: []identity.Rule{{Claim: "groups", Value: "kafka-billing", Groups: []string{"billing-*"}}}}}
	one := startListener(t, cfg, nil, zap.NewNop())

	long := "https://\"\n\x1b" + strings.Repeat("a", 300) + ".example/"
	for _, c := range []struct {
		name, addr, token string
		want              []string
	}{
		{"none configured", none.Addr(), foreignJWT(t, "https://idp.example/realms/prod", "JWT"),
			[]string{`issuer "https://idp.example/realms/prod" is not an OIDC issuer of this Kafka listener`, "gateway.kafka_oidc.issuers is empty"}},
		{"another issuer", one.Addr(), foreignJWT(t, "https://other.example", "JWT"),
			[]string{`issuer "https://other.example" is not an OIDC issuer of this Kafka listener`, "not among the 1 of gateway.kafka_oidc.issuers"}},
		{"no typ", one.Addr(), foreignJWT(t, "https://other.example", ""),
			[]string{`issuer "https://other.example" is not an OIDC issuer`}},
		{"trailing slash", one.Addr(), foreignJWT(t, "https://idp.example/realms/prod/", "JWT"),
			[]string{`issuer "https://idp.example/realms/prod/" is not an OIDC issuer`, `differs from the configured "https://idp.example/realms/prod" only by a trailing slash`,
				"gateway.kafka_oidc.issuers[].issuer"}},
		{"a long iss with quotes and control characters", one.Addr(), foreignJWT(t, long, "JWT"),
			[]string{`issuer "https://\"\n\x1baaaa`, `is not an OIDC issuer`}},
	} {
		for _, usePlain := range []bool{false, true} {
			err := saslError(t, c.addr, c.token, usePlain)
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("%s (plain %v): %v, want SASL_AUTHENTICATION_FAILED", c.name, usePlain, err)
			}
			msg := err.Error()
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s (plain %v): %q, want it to say %q", c.name, usePlain, msg, w)
				}
			}
			if parts := strings.Split(c.token, "."); strings.Contains(msg, parts[1]) || strings.Contains(msg, parts[2]) ||
				strings.ContainsAny(msg, "\n\x1b") || len(msg) > 600 {
				t.Errorf("%s (plain %v): %q echoes the token or raw characters", c.name, usePlain, msg)
			}
		}
	}

	// capgate's own kinds keep capgate's refusal, whatever their iss.
	for _, typ := range []ocap.Kind{ocap.KindCapability, ocap.KindClient, ocap.KindMember} {
		err := saslError(t, one.Addr(), foreignJWT(t, "https://other.example", string(typ)), false)
		if !errors.Is(err, kerr.SaslAuthenticationFailed) || strings.Contains(err.Error(), "issuer") {
			t.Errorf("typ %s: %v, want capgate's verifier's refusal", typ, err)
		}
	}

	// A spent failure budget keeps its refusal.
	spent := startListener(t, testConfig(), gateAuthenticator{gate: spentGate{}}, zap.NewNop())
	err := saslError(t, spent.Addr(), foreignJWT(t, "https://other.example", "JWT"), false)
	if !errors.Is(err, kerr.SaslAuthenticationFailed) || strings.Contains(err.Error(), "issuer") {
		t.Errorf("spent budget: %v, want the budget's refusal", err)
	}
}

// spentGate refuses every token as over the address's failure budget.
type spentGate struct{ refuseGate }

func (spentGate) VerifyCapability([]byte, netip.Addr, time.Time) (*ocap.Claims, error) {
	return nil, &failguard.Spent{Wait: time.Second}
}

// TestOpaqueTokenAtSASLSaysWhatToUse: a Kafka client's sasl.password set
// to capgate's admin token (opaque, no dot: what a new user tries first)
// read "malformed token: 3 dot-separated segments … expected, got 1" and
// no more; now the refusal says such a token is not for Kafka clients and
// what is. A token with dots keeps its bare reason.
func TestOpaqueTokenAtSASLSaysWhatToUse(t *testing.T) {
	l := startListener(t, testConfig(), gateAuthenticator{gate: malformedGate{}}, zap.NewNop())
	const hint = "is not for Kafka clients: use a client credential"
	for token, hinted := range map[string]bool{"F7wUApaww_wOZsmkCQ8slF_J-piFX1QwRbBAJXUlww0": true, "not.a.jwt": false} {
		for _, usePlain := range []bool{false, true} {
			err := saslError(t, l.Addr(), token, usePlain)
			if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "malformed token") || strings.Contains(err.Error(), hint) != hinted {
				t.Errorf("%q (plain %v): %v; want SASL_AUTHENTICATION_FAILED, the hint %v", token, usePlain, err, hinted)
			}
		}
	}
}

// malformedGate refuses every token as the gateway's verifier refuses
// one that is no JWS (ocap.ErrMalformed).
type malformedGate struct{ refuseGate }

func (malformedGate) VerifyCapability(token []byte, _ netip.Addr, _ time.Time) (*ocap.Claims, error) {
	return nil, fmt.Errorf("%w: %d dot-separated segments", ocap.ErrMalformed, bytes.Count(token, []byte("."))+1)
}

// TestIdPTokenForAnotherAudienceAtSASL (dayone2): a kgo client whose IdP
// token — signed by the configured issuer, served over HTTPS — is for
// another audience (Keycloak's default aud is "account") read "token has
// invalid claims: token has invalid audience" in SASL_AUTHENTICATION_FAILED;
// now it names the token's aud, the issuer's audiences and the setting,
// gateway.kafka_oidc.issuers[] on this listener.
func TestIdPTokenForAnotherAudienceAtSASL(t *testing.T) {
	idp := idptest.New(t, "ES256")
	cfg := testConfig()
	cfg.OIDC = identity.DefaultConfig()
	cfg.OIDC.Issuers = []identity.IssuerConfig{{Issuer: idp.URL, CAFile: idp.CAFile, Audiences: []string{"capgate"},
		Rules: []identity.Rule{{Claim: "groups", Value: "kafka-billing", Groups: []string{"billing-*"}}}}}
	ln := startListener(t, cfg, nil, zap.NewNop())
	now := time.Now()
	token := idp.Token(idptest.Claims{"sub": "svc", "aud": "account", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"groups": []string{"kafka-billing"}})
	err := saslError(t, ln.Addr(), token, false)
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a token for audience account: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if n := strings.Count(err.Error(), "token refused"); n != 1 {
		t.Errorf("a token for audience account: %q says \"token refused\" %d times, want once", err, n)
	}
	for _, want := range []string{`aud ["account"]`, `audiences ["capgate"]`, "gateway.kafka_oidc.issuers[]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("a token for audience account: %q, want it to say %q", err, want)
		}
	}
}
