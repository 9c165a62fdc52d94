package coordinator_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
	"github.com/capgate/capgate/ocap"
)

// BenchmarkJoinIdPVsCredential: the cost of a join authenticated by a
// JWKS-verified IdP token (RS256, keys cached after the first fetch)
// against one with a capgate client credential, in the same run on one
// coordinator, interleaved: each join opens a fresh one-member group of
// one partition, so the two differ only in how the bearer is verified.
// The capgate credential is verified once and then served from the
// verified-token cache; the IdP token is verified on every join (no
// cache: its signature is checked each time). The second half measures
// verification alone: identity.Verifier (RS256, ES256, EdDSA) against
// ocap.Verifier (EdDSA) without cache.
func BenchmarkJoinIdPVsCredential(b *testing.B) {
	e := newBenchEnv(b, map[string]int32{"orders": 1})
	idp := idptest.New(b, "RS256")
	e.cfg.OIDC.Issuers = []identity.IssuerConfig{{Issuer: idp.URL, CAFile: idp.CAFile, Audiences: []string{"capgate"},
		Rules: []identity.Rule{{Claim: "groups", Value: "kafka", Groups: []string{"*"}, Topics: []string{"orders"}}}}}
	h := e.start(b)
	now := time.Now()
	token := idp.Token(idptest.Claims{"sub": "svc", "aud": "capgate", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "groups": []string{"kafka"}})
	credential := h.clientCredential(b, []string{"*"}, []string{"orders"})
	joins := 300
	if testing.Short() {
		joins = 50
	}
	req := api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 60000}
	group := 0
	join := func(bearer string) time.Duration {
		group++
		start := time.Now()
		h.call(b, "POST", fmt.Sprintf("/v1/groups/bench-%d/join", group), bearer, req, 200, nil)
		return time.Since(start)
	}
	join(token) // the first IdP join fetches discovery and keys
	for b.Loop() {
		var viaIdP, viaCredential []time.Duration
		for range joins {
			viaIdP = append(viaIdP, join(token))
			viaCredential = append(viaCredential, join(credential))
		}
		us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(us(percentile(viaIdP, 50)), "idp-join-p50-µs")
		b.ReportMetric(us(percentile(viaCredential, 50)), "credential-join-p50-µs")
		b.ReportMetric(us(percentile(viaIdP, 99)), "idp-join-p99-µs")
		b.ReportMetric(us(percentile(viaCredential, 99)), "credential-join-p99-µs")
		b.ReportMetric(float64(percentile(viaIdP, 50))/float64(percentile(viaCredential, 50)), "x-idp/credential-p50")
	}
	if got := idp.JWKSFetches.Load(); got != 1 {
		b.Fatalf("%d JWKS fetches: the keys should be cached", got)
	}
}

// BenchmarkVerifyIdPToken: verification alone, no cache — the IdP's
// RS256, ES256 and EdDSA tokens through identity.Verifier, and a capgate
// client credential (EdDSA) through ocap.Verifier, in one run.
func BenchmarkVerifyIdPToken(b *testing.B) {
	now := time.Now()
	claims := func() idptest.Claims {
		return idptest.Claims{"sub": "svc", "aud": "capgate", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "groups": []string{"kafka"}}
	}
	for _, alg := range []string{"RS256", "ES256", "EdDSA"} {
		idp := idptest.New(b, alg)
		cfg := identity.DefaultConfig()
		cfg.Issuers = []identity.IssuerConfig{{Issuer: idp.URL, CAFile: idp.CAFile, Audiences: []string{"capgate"},
			Rules: []identity.Rule{{Claim: "groups", Value: "kafka", Groups: []string{"*"}}}}}
		v, err := identity.New(cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		token := idp.Token(claims())
		if _, err := v.Verify(context.Background(), token, now); err != nil {
			b.Fatal(err)
		}
		b.Run("idp-"+alg, func(b *testing.B) {
			for b.Loop() {
				if _, err := v.Verify(context.Background(), token, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	ring, err := ocap.NewKeyRing(rand.Reader, now)
	if err != nil {
		b.Fatal(err)
	}
	vc := ocap.VerifierConfig{Issuer: "capgate-coordinator", Audience: "dev", Leeway: time.Second, MaxLease: time.Hour, MaxCredentialTTL: 24 * time.Hour}
	minter, err := ocap.NewMinter(vc, ring, rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	token, _, err := minter.Mint(ocap.KindClient, ocap.Claims{Subject: "svc", Groups: []string{"*"}, Topics: []string{"*"}}, now, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	v, err := ocap.NewVerifier(vc)
	if err != nil {
		b.Fatal(err)
	}
	keys, err := ocap.ImportJWKS(ring.JWKS())
	if err != nil {
		b.Fatal(err)
	}
	v.SetKeys(keys)
	b.Run("capgate-credential-EdDSA", func(b *testing.B) {
		for b.Loop() {
			if _, err := v.Verify(token, ocap.KindClient, now); err != nil {
				b.Fatal(err)
			}
		}
	})
}
