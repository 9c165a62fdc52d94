package gateway

import (
	"crypto/rand"
	"net/http"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

func TestReadinessBeforeAndAfterFirstSync(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{beforeStart: func(h *harness) { h.sync.setFailing(true) }})
	tok, _ := h.mint(capClaims(0))
	h.sync.waitPolls(t, 2) // the gateway tried, and failed, twice
	expectError(t, h.get("", "/readyz"), http.StatusServiceUnavailable, api.CodeNotReady)
	r := h.get(tok, recordsPath(0, "offset=0"))
	expectError(t, r, http.StatusServiceUnavailable, api.CodeNotReady)
	if r.header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	if r := h.get("", "/healthz"); r.status != http.StatusOK {
		t.Fatalf("healthz %d", r.status)
	}
	h.sync.setFailing(false)
	h.waitReady()
	if r := h.get("", "/readyz"); r.status != http.StatusOK {
		t.Fatalf("readyz after sync: %d %s", r.status, r.body)
	}
	if r := h.get(tok, recordsPath(0, "offset=0")); r.status != http.StatusOK {
		t.Fatalf("fetch after sync: %d %s", r.status, r.body)
	}
}

func TestSelfFenceAfterSyncTimeout(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.SyncWait, c.SyncTimeout = 200*time.Millisecond, time.Second })
	tok, _ := h.mint(capClaims(0))
	if r := h.get(tok, recordsPath(0, "offset=0")); r.status != http.StatusOK {
		t.Fatalf("fetch while synced: %d", r.status)
	}
	h.sync.setFailing(true)
	var r response
	waitFor(t, "self-fencing", func() bool {
		r = h.get(tok, recordsPath(0, "offset=0"))
		return r.status != http.StatusOK
	})
	expectError(t, r, http.StatusServiceUnavailable, api.CodeOutOfSync)
	if r.header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	expectError(t, h.get("", "/readyz"), http.StatusServiceUnavailable, api.CodeOutOfSync)
	expectError(t, h.do(http.MethodPost, recordsURL(0), tok, nil), http.StatusServiceUnavailable, api.CodeOutOfSync)
	h.sync.setFailing(false)
	waitFor(t, "resync", func() bool { return h.get(tok, recordsPath(0, "offset=0")).status == http.StatusOK })
}

func TestKeyRotationRetiresRemovedKeys(t *testing.T) {
	h := newHarness(t, nil)
	tok, _ := h.mint(capClaims(0))
	if r := h.get(tok, recordsPath(0, "offset=0")); r.status != http.StatusOK {
		t.Fatalf("before rotation: %d", r.status)
	}
	ring, err := ocap.NewKeyRing(rand.Reader, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	seq := h.sync.push(api.SyncResponse{Keys: ring.JWKS().Keys})
	h.sync.waitAck(t, seq)
	// The token is in the verified-token cache; the removed key must flush it.
	expectError(t, h.get(tok, recordsPath(0, "offset=0")), http.StatusUnauthorized, api.CodeUnauthorized)
	minter, _ := ocap.NewMinter(testVerifierConfig(), ring, rand.Reader)
	fresh, _, _ := minter.Mint(ocap.KindCapability, capClaims(0), time.Now(), time.Minute)
	if r := h.get(fresh, recordsPath(0, "offset=0")); r.status != http.StatusOK {
		t.Fatalf("token of the new key: %d %s", r.status, r.body)
	}
}

// TestCoordinatorRestartResetsView: after the coordinator forgets its log,
// the gateway's poll (after > seq) gets a snapshot that replaces the view.
func TestCoordinatorRestartResetsView(t *testing.T) {
	h := newHarness(t, nil)
	tok, claims := h.mint(capClaims(0))
	seq := h.sync.push(api.SyncResponse{Denied: []api.Denied{{JTI: claims.ID, Exp: int64(claims.ExpiresAt)}}})
	h.sync.waitAck(t, seq)
	expectError(t, h.get(tok, recordsPath(0, "offset=0")), http.StatusConflict, api.CodeCapabilityRevoked)
	h.sync.restart()
	waitFor(t, "the snapshot applied", func() bool { return h.gw.view.Seq() == 1 })
	if r := h.get(tok, recordsPath(0, "offset=0")); r.status != http.StatusOK {
		t.Fatalf("after the reset: %d %s", r.status, r.body)
	}
}

func TestCloseDrainsInFlightFetches(t *testing.T) {
	h := newHarness(t, nil)
	tok, _ := h.mint(capClaims(0))
	done := make(chan response, 1)
	go func() { done <- h.get(tok, recordsPath(0, "offset=0&max_wait_ms=12000")) }()
	waitFor(t, "the fetch in flight", func() bool { return h.gw.inflight.count() == 1 })
	start := time.Now()
	if err := h.gw.Close(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	expectError(t, r, http.StatusServiceUnavailable, api.CodeUnavailable)
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("Close took %v", elapsed)
	}
}
