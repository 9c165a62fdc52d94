package identity_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
)

// prefetchVerifier is a verifier whose warnings a test reads, and a
// channel told of each one as it is written.
func prefetchVerifier(t *testing.T, cfg identity.Config) (*identity.Verifier, *observer.ObservedLogs, <-chan struct{}) {
	t.Helper()
	core, logs := observer.New(zap.WarnLevel)
	warned := make(chan struct{}, 16)
	log := zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		if e.Level >= zap.WarnLevel {
			warned <- struct{}{}
		}
		return nil
	}))
	v, err := identity.New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	return v, logs, warned
}

// TestPrefetchNamesAnUntrustedIdPAtStart (newuser3 #12): an issuer
// behind a private CA configured without ca_file is logged when the
// process starts — Prefetch, which the coordinator calls — with a hint
// naming ca_file, and without "keeping the previous keys" (there were
// none). Before, nothing was logged until the first user's token, and
// the line named no setting.
func TestPrefetchNamesAnUntrustedIdPAtStart(t *testing.T) {
	is := idptest.New(t, "ES256")
	cfg := config(is)
	cfg.Issuers[0].CAFile = ""
	v, logs, warned := prefetchVerifier(t, cfg)
	v.Prefetch(time.Now())
	<-warned
	got := logs.FilterMessage(firstFetchFailed).All()
	if len(got) != 1 {
		t.Fatalf("warnings %+v, want one %q", logs.All(), firstFetchFailed)
	}
	if hint, _ := got[0].ContextMap()["hint"].(string); !strings.Contains(hint, "oidc.issuers[].ca_file") {
		t.Fatalf("the warning's hint %q does not name ca_file", hint)
	}
}

// TestFailedPrefetchSpendsNoInterval: a prefetch that failed (the IdP
// still starting) does not use jwks_refresh_min — the first token after
// the IdP is up fetches the key set and verifies; a prefetch that worked
// spares the first token its fetch.
func TestFailedPrefetchSpendsNoInterval(t *testing.T) {
	now := time.Now()
	is := idptest.New(t, "RS256")
	is.ServeOversizedJWKS(64 << 10)
	cfg := config(is)
	cfg.MaxJWKSBytes = 16 << 10
	v, _, warned := prefetchVerifier(t, cfg)
	v.Prefetch(now)
	<-warned // the prefetch failed and logged it (the fetch is over)
	is.ServeJWKS()
	token := is.Token(claims(now, idptest.Claims{"groups": []string{"kafka-billing"}}))
	if _, err := v.Verify(context.Background(), token, now); err != nil {
		t.Fatalf("the first token after a failed prefetch: %v, want it verified (a fetch of its own)", err)
	}
	if got := is.JWKSFetches.Load(); got != 2 {
		t.Fatalf("%d key set fetches, want 2 (the prefetch, the token's)", got)
	}

	ok := idptest.New(t, "RS256")
	v2, _, _ := prefetchVerifier(t, config(ok))
	held, release := ok.HoldJWKS()
	v2.Prefetch(now)
	<-held // the prefetch is at the key set
	verified := make(chan error, 1)
	go func() {
		_, err := v2.Verify(context.Background(), ok.Token(claims(now, idptest.Claims{"groups": []string{"kafka-billing"}})), now)
		verified <- err
	}()
	release()
	if err := <-verified; err != nil {
		t.Fatal(err)
	}
	if got := ok.JWKSFetches.Load(); got != 1 {
		t.Fatalf("%d key set fetches, want the prefetch's alone", got)
	}
}
