package kafkaclients

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
)

// idpConfig trusts is (its own CA) for tokens with aud "capgate": the
// group claim kafka-billing may join billing-* and read orders.
func idpConfig(is *idptest.Issuer) identity.Config {
	cfg := identity.DefaultConfig()
	cfg.JWKSRefreshMin = 10 * time.Millisecond // the test rotates keys
	cfg.Issuers = []identity.IssuerConfig{{
		Issuer: is.URL, CAFile: is.CAFile, Audiences: []string{"capgate"},
		Rules: []identity.Rule{{Claim: "groups", Value: "kafka-billing", Groups: []string{"billing-*"}, Topics: []string{"orders"}}},
	}}
	return cfg
}

func idpClaims(sub string, extra idptest.Claims) idptest.Claims {
	now := time.Now()
	c := idptest.Claims{"sub": sub, "aud": "capgate", "groups": []string{"kafka-billing"}, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

// saslRefusal is the error a kgo client gets from the listener when it
// authenticates with token over OAUTHBEARER (plain: PLAIN).
func saslRefusal(t *testing.T, s *Stack, token string, usePlain bool) error {
	t.Helper()
	cl := kgoClient(t, s.KafkaAddrs(), token, usePlain, kgo.RetryTimeout(2*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

// TestIdPTokenOverSASL: a JWT of a configured OIDC issuer authenticates a
// kgo client over OAUTHBEARER (and PLAIN); a KIP-848 group consumer joins
// a group its claims map to and reads every record; after a key rotation a
// token signed with the new key works at once (JWKS refreshed on the
// unknown kid). Each attack is refused at SASL with
// SASL_AUTHENTICATION_FAILED: another issuer, wrong audience, expired,
// unknown kid, HS256 keyed with the JWKS, alg none, claims no rule maps,
// and a denied identity; a group outside the mapping is
// GROUP_AUTHORIZATION_FAILED.
func TestIdPTokenOverSASL(t *testing.T) {
	idp := idptest.New(t, "ES256")
	s := Start(t, Options{Partitions: 4, OIDC: idpConfig(idp)})
	for p := range int32(4) {
		produceDirect(t, s, "orders", p, 3)
	}

	m := joinGroup(t, s, "idp-c1", "billing-eu", idp.Token(idpClaims("svc-billing", nil)), kip848)
	sdk.Eventually(t, 20*time.Second, "the IdP member read every record", func() (bool, string) {
		n := len(m.Records())
		return n == 12, fmt.Sprintf("%d of 12 records; errors %v", n, m.Errors())
	})
	ok, why := settled(t, s, "billing-eu", 1)
	if !ok {
		t.Fatalf("group billing-eu in capgate: %s", why)
	}

	// The IdP rotates its key: a token under the new kid works at once.
	if _, err := idp.Rotate("k2", "ES256", false); err != nil {
		t.Fatal(err)
	}
	rotated := idp.Token(idpClaims("svc-billing", nil))
	if err := saslRefusal(t, s, rotated, true); err != nil {
		t.Fatalf("token signed with the rotated key, over PLAIN: %v", err)
	}

	// A group the claims do not map to.
	outside := kgoClient(t, s.KafkaAddrs(), rotated, false, kgo.ClientID("idp-outside"), kgo.ConsumerGroup("sales"),
		kgo.ConsumeTopics("orders"), kgo.ServerSideBalancer())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var groupErr error
	for groupErr == nil && ctx.Err() == nil {
		outside.PollFetches(ctx).EachError(func(_ string, _ int32, err error) { groupErr = err })
	}
	if !errors.Is(groupErr, kerr.GroupAuthorizationFailed) {
		t.Fatalf("joining group sales with an IdP token mapped to billing-*: %v, want GROUP_AUTHORIZATION_FAILED", groupErr)
	}

	other := idptest.New(t, "ES256") // not configured
	current := idp.SigningKey()
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, withIss(idpClaims("svc-billing", nil), idp.URL))
	hs.Header["kid"] = current.Kid
	hsToken, err := hs.SignedString(idp.JWKS()) // alg confusion: the published key set as an HMAC secret
	if err != nil {
		t.Fatal(err)
	}
	none := jwt.NewWithClaims(jwt.SigningMethodNone, withIss(idpClaims("svc-billing", nil), idp.URL))
	none.Header["kid"] = current.Kid
	noneToken, err := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := idptest.NewKey("k-unknown", "ES256")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, token string }{
		{"another issuer", other.Token(idpClaims("svc-billing", nil))},
		{"wrong audience", idp.Token(idpClaims("svc-billing", idptest.Claims{"aud": "someone-else"}))},
		{"expired", idp.Token(idpClaims("svc-billing", idptest.Claims{"iat": time.Now().Add(-2 * time.Hour).Unix(), "exp": time.Now().Add(-time.Hour).Unix()}))},
		{"unknown kid", idp.TokenWith(stranger, idpClaims("svc-billing", nil))},
		{"HS256 keyed with the JWKS", hsToken},
		{"alg none", noneToken},
		{"claims no rule maps", idp.Token(idpClaims("svc-billing", idptest.Claims{"groups": []string{"staff"}}))},
	} {
		for _, usePlain := range []bool{false, true} {
			err := saslRefusal(t, s, c.token, usePlain)
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Errorf("%s (plain %v): %v, want SASL_AUTHENTICATION_FAILED", c.name, usePlain, err)
			}
		}
	}

	// A token of an issuer the gateway is not configured for says so,
	// naming its iss (and the config key), not the token: over the real
	// gateway's verifier and failure budget.
	for _, c := range []struct{ iss, want string }{
		{other.URL, "not among the 1 of gateway.kafka_oidc.issuers"},
		{idp.URL + "/", fmt.Sprintf("differs from the configured %q only by a trailing slash", idp.URL)},
	} {
		token := other.Token(withIss(idpClaims("svc-billing", nil), c.iss))
		for _, usePlain := range []bool{false, true} {
			err := saslRefusal(t, s, token, usePlain)
			if msg := fmt.Sprint(err); !errors.Is(err, kerr.SaslAuthenticationFailed) ||
				!strings.Contains(msg, fmt.Sprintf("issuer %q is not an OIDC issuer of this Kafka listener", c.iss)) ||
				!strings.Contains(msg, c.want) || strings.Contains(msg, strings.Split(token, ".")[1]) {
				t.Errorf("iss %s (plain %v): %v, want SASL_AUTHENTICATION_FAILED naming the issuer, %q, and not the token", c.iss, usePlain, err, c.want)
			}
		}
	}

	// Deny the identity: its fresh tokens are refused at SASL.
	s.Deny(t, identity.IdentityID(idp.URL, "svc-billing"))
	sdk.Eventually(t, 10*time.Second, "the denied identity is refused", func() (bool, string) {
		err := saslRefusal(t, s, idp.Token(idpClaims("svc-billing", nil)), false)
		return errors.Is(err, kerr.SaslAuthenticationFailed) && strings.Contains(err.Error(), "capability_revoked"), fmt.Sprint(err)
	})
	if err := saslRefusal(t, s, idp.Token(idpClaims("svc-payments", nil)), false); err != nil {
		t.Fatalf("another identity of the same issuer after the denial: %v", err)
	}
}

func withIss(c idptest.Claims, iss string) idptest.Claims {
	c["iss"] = iss
	return c
}
