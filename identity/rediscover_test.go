package identity_test

import (
	"context"
	"testing"
	"time"

	"github.com/capgate/capgate/identity/idptest"
)

// TestKeySetMoveIsFollowed (dayone2 #4): the IdP moves its key set to
// another URL (discovery names the new one; the old answers 404) and
// signs with a key published only there. The next fetch — caused by the
// new kid, after jwks_refresh_min — reads discovery again and finds it;
// before, the jwks_uri discovered first was kept for the process' life,
// and every token under the new key was refused until a restart. The
// rediscovery is bounded as fetches are: a made-up kid within
// jwks_refresh_min causes neither a discovery nor a key set fetch.
func TestKeySetMoveIsFollowed(t *testing.T) {
	t0 := time.Now()
	is := idptest.New(t, "ES256")
	cfg := config(is)
	cfg.JWKSRefreshMin = time.Minute
	v := newVerifier(t, cfg)
	mapped := func(at time.Time) idptest.Claims {
		return claims(at, idptest.Claims{"groups": []string{"kafka-billing"}})
	}
	if _, err := v.Verify(context.Background(), is.Token(mapped(t0)), t0); err != nil {
		t.Fatal(err)
	}

	is.MoveJWKS("/realms/test/protocol/openid-connect/certs")
	if _, err := is.Rotate("k2", "ES256", false); err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(cfg.JWKSRefreshMin)
	if _, err := v.Verify(context.Background(), is.Token(mapped(t1)), t1); err != nil {
		t.Fatalf("a token under a key published at the key set's new URL: %v", err)
	}
	if got := is.DiscoveryFetches.Load(); got != 2 {
		t.Fatalf("%d discovery fetches, want 2 (start, and the fetch after the move)", got)
	}

	discovered, fetched := is.DiscoveryFetches.Load(), is.JWKSFetches.Load()
	t2 := t1.Add(time.Second)
	if _, err := v.Verify(context.Background(), is.TokenWith(mustKey(t, "made-up", "ES256"), mapped(t2)), t2); err == nil {
		t.Fatal("a made-up kid verified")
	}
	if is.DiscoveryFetches.Load() != discovered || is.JWKSFetches.Load() != fetched {
		t.Fatalf("a made-up kid within jwks_refresh_min fetched: discovery %d→%d, key set %d→%d",
			discovered, is.DiscoveryFetches.Load(), fetched, is.JWKSFetches.Load())
	}
}

// TestKeySetFetchedWhileDiscoveryHangs (review26): once discovery has
// given a jwks_uri, an issuer whose discovery document hangs still has
// its key set read at the URL discovery gave last — what keySetURL's
// fallback promises. Discovery shares the one fetch_timeout with the key
// set, so a discovery that hangs spent all of it and the fallback's key
// set request went out with no time left: every refresh failed, and a
// token under a rotated key was refused for as long as discovery hung
// (before rediscovery, the key set was fetched from the URL found at
// start, and the rotation was followed).
func TestKeySetFetchedWhileDiscoveryHangs(t *testing.T) {
	t0 := time.Now()
	is := idptest.New(t, "ES256")
	cfg := config(is)
	cfg.JWKSRefreshMin, cfg.FetchTimeout = time.Minute, 2*time.Second
	v := newVerifier(t, cfg)
	mapped := func(at time.Time) idptest.Claims {
		return claims(at, idptest.Claims{"groups": []string{"kafka-billing"}})
	}
	if _, err := v.Verify(context.Background(), is.Token(mapped(t0)), t0); err != nil {
		t.Fatal(err)
	}
	release := is.HoldDiscovery()
	defer release()
	if _, err := is.Rotate("k2", "ES256", false); err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(cfg.JWKSRefreshMin)
	if _, err := v.Verify(context.Background(), is.Token(mapped(t1)), t1); err != nil {
		t.Fatalf("a token under a rotated key while discovery hangs (the key set answers at the URL discovery gave): %v", err)
	}
	if got := is.JWKSFetches.Load(); got != 2 {
		t.Fatalf("%d key set fetches, want 2 (start, and the refresh at the URL discovery gave before)", got)
	}
}
