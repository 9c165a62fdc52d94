package identity_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
)

const (
	fetchFailed      = "oidc: key set fetch failed; keeping the previous keys"
	firstFetchFailed = "oidc: key set fetch failed; no keys yet: this issuer's tokens are refused until a fetch succeeds"
)

// verifierWithLogs is a verifier whose warnings a test reads.
func verifierWithLogs(t *testing.T, cfg identity.Config) (*identity.Verifier, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.WarnLevel)
	v, err := identity.New(cfg, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	return v, logs
}

// TestCachedKidAnsweredWhileAFetchHangs (redteam2 E, the attack): while
// the IdP's key set hangs, a token with a made-up kid (no valid
// signature needed) starts a fetch; a token under a kid already cached
// verifies at once, while that fetch is still held. Before, the key set's
// lock was held across the download: the cached kid waited for the
// attacker's fetch to fail at fetch_timeout. A burst of unknown kids
// meanwhile waits for that one fetch and starts none of its own, and
// the token under the IdP's new kid, waiting for it, verifies once the
// key set answers.
func TestCachedKidAnsweredWhileAFetchHangs(t *testing.T) {
	t0 := time.Now()
	is := idptest.New(t, "ES256")
	cfg := config(is)
	cfg.FetchTimeout = 3 * time.Second // without the fix the cached kid waits this long, then the test fails
	v, logs := verifierWithLogs(t, cfg)
	mapped := func(at time.Time) idptest.Claims {
		return claims(at, idptest.Claims{"groups": []string{"kafka-billing"}})
	}
	k1 := is.SigningKey()
	if _, err := v.Verify(context.Background(), is.Token(mapped(t0)), t0); err != nil {
		t.Fatal(err)
	}

	held, release := is.HoldJWKS()
	defer release()
	if _, err := is.Rotate("k2", "ES256", true); err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(cfg.JWKSRefreshMin) // a refresh is allowed again
	newKid := make(chan error, 1)
	go func() {
		_, err := v.Verify(context.Background(), is.Token(mapped(t1)), t1)
		newKid <- err
	}()
	<-held // the fetch for k2 is in flight, and hangs

	// Made-up kids meanwhile: they wait for the same fetch (no second
	// one: JWKSFetches counts requests the IdP received).
	forged := make(chan error, 8)
	for i := range cap(forged) {
		go func() {
			_, err := v.Verify(context.Background(), is.TokenWith(mustKey(t, fmt.Sprintf("made-up-%d", i), "ES256"), mapped(t1)), t1)
			forged <- err
		}()
	}

	if _, err := v.Verify(context.Background(), is.TokenWith(k1, mapped(t1)), t1); err != nil {
		t.Fatalf("cached kid during the fetch: %v", err)
	}
	if n := logs.FilterMessage(fetchFailed).Len(); n != 0 {
		t.Fatalf("the cached kid was answered only after the hanging fetch failed (%d failures logged): it waited for an unknown kid's fetch", n)
	}

	release()
	if err := <-newKid; err != nil {
		t.Fatalf("the new kid, after the held fetch: %v", err)
	}
	for range cap(forged) {
		if err := <-forged; !errors.Is(err, identity.ErrInvalid) || !strings.Contains(err.Error(), `unknown kid "made-up-`) {
			t.Fatalf("made-up kid: %v", err)
		}
	}
	if got := is.JWKSFetches.Load(); got != 2 {
		t.Fatalf("%d JWKS fetches, want 2 (the first, and one for the new kid and all the made-up ones)", got)
	}
}

// TestStaleSetServesWhileItRefreshes: once the set is older than
// jwks_cache_ttl a cached kid still answers at once and one refresh
// starts beside; while it hangs, further lookups neither wait nor start
// another.
func TestStaleSetServesWhileItRefreshes(t *testing.T) {
	t0 := time.Now()
	is := idptest.New(t, "EdDSA")
	cfg := config(is)
	cfg.JWKSCacheTTL = time.Minute
	v, logs := verifierWithLogs(t, cfg)
	token := func(at time.Time) string {
		return is.Token(claims(at, idptest.Claims{"groups": []string{"kafka-billing"}}))
	}
	if _, err := v.Verify(context.Background(), token(t0), t0); err != nil {
		t.Fatal(err)
	}
	held, release := is.HoldJWKS()
	defer release()
	stale := t0.Add(cfg.JWKSCacheTTL)
	for range 3 {
		if _, err := v.Verify(context.Background(), token(stale), stale); err != nil {
			t.Fatalf("cached kid of a stale set: %v", err)
		}
	}
	<-held // the refresh started
	if n := logs.FilterMessage(fetchFailed).Len(); n != 0 {
		t.Fatalf("%d failed fetches logged before the refresh was released", n)
	}
	release()
	if got := is.JWKSFetches.Load(); got != 2 {
		t.Fatalf("%d JWKS fetches, want 2 (the first and one refresh)", got)
	}
}

// TestUnknownKidSaysTheKeySetFailed: when the fetch an unknown kid
// caused failed, the refusal says the key set could not be fetched
// (not only "unknown kid"), without the IdP's URL or the network error,
// which go to the log; within jwks_refresh_min the next unknown kid is
// answered so at once, without a fetch.
func TestUnknownKidSaysTheKeySetFailed(t *testing.T) {
	now := time.Now()
	is := idptest.New(t, "RS256")
	is.ServeOversizedJWKS(64 << 10)
	cfg := config(is)
	cfg.MaxJWKSBytes = 16 << 10
	v, logs := verifierWithLogs(t, cfg)
	for i := range 2 {
		_, err := v.Verify(context.Background(), is.Token(claims(now, idptest.Claims{"groups": []string{"kafka-billing"}})), now)
		if !errors.Is(err, identity.ErrInvalid) || !strings.Contains(err.Error(), `unknown kid "k1": the issuer's key set could not be fetched`) {
			t.Fatalf("try %d: %v", i, err)
		}
		if strings.Contains(err.Error(), "https://") || strings.Contains(err.Error(), "max_jwks_bytes") {
			t.Fatalf("try %d: the refusal leaks the fetch's details: %v", i, err)
		}
	}
	if got := is.JWKSFetches.Load(); got != 1 {
		t.Fatalf("%d JWKS fetches, want 1", got)
	}
	if n := logs.FilterMessage(firstFetchFailed).Len(); n != 1 {
		t.Fatalf("%d failed fetches logged, want 1", n)
	}
}

// TestKeySetWithoutUsableKeysKeepsThePreviousKeys: an IdP (or a proxy
// before it) that answers its key set 200 with no key this process can
// use — `{}`, `{"keys":[]}`, only keys of a kind it skips — fails the
// fetch: the keys fetched before stay and their tokens verify, and the
// failure is logged. Before, such an answer replaced the keys and every
// token of the issuer was refused "unknown kid" until the next good fetch.
func TestKeySetWithoutUsableKeysKeepsThePreviousKeys(t *testing.T) {
	for _, body := range []string{`{}`, `{"keys":[]}`, `{"keys":[{"kty":"oct","kid":"s1","k":"c2VjcmV0"}]}`} {
		t.Run(body, func(t *testing.T) {
			t0 := time.Now()
			is := idptest.New(t, "ES256")
			cfg := config(is)
			v, logs := verifierWithLogs(t, cfg)
			mapped := func(at time.Time) idptest.Claims {
				return claims(at, idptest.Claims{"groups": []string{"kafka-billing"}})
			}
			if _, err := v.Verify(context.Background(), is.Token(mapped(t0)), t0); err != nil {
				t.Fatal(err)
			}
			is.ServeJWKSBody(body)
			// An unknown kid, once a refresh is allowed, makes a fetch
			// and waits for it: the IdP answers body.
			t1 := t0.Add(cfg.JWKSRefreshMin)
			_, err := v.Verify(context.Background(), is.TokenWith(mustKey(t, "made-up", "ES256"), mapped(t1)), t1)
			if !errors.Is(err, identity.ErrInvalid) {
				t.Fatalf("made-up kid: %v", err)
			}
			if got := is.JWKSFetches.Load(); got != 2 {
				t.Fatalf("%d JWKS fetches, want 2", got)
			}
			if _, err := v.Verify(context.Background(), is.Token(mapped(t1)), t1); err != nil {
				t.Fatalf("a token under the key fetched before, after the IdP answered %s: %v", body, err)
			}
			if n := logs.FilterMessage(fetchFailed).Len(); n != 1 {
				t.Fatalf("%d failed fetches logged, want 1", n)
			}
		})
	}
}
