package gateway

import (
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
)

// TestSettingsLearnedFromTheReset: the gateway configures no issuer,
// audience, leeway or lease cap; it learns the coordinator's on the first
// reset and verifies capabilities with them: one minted for the learned
// issuer and audience serves, one for another audience is refused.
func TestSettingsLearnedFromTheReset(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(0, 1)
	good, _ := h.mint(capClaims(0))
	if r := h.get(good, recordsPath(0, "offset=0")); r.status != 200 {
		t.Fatalf("capability of the learned issuer and audience: %d %s", r.status, r.body)
	}
	if s := h.gw.follower.Settings(); s == nil || s.Issuer != testIssuer || s.Audience != testAudience || h.gw.audience() != testAudience {
		t.Fatalf("learned %+v", s)
	}
}

// TestUnfitSyncTimeoutIsNotReady: a gateway whose sync_timeout is not
// below the coordinator's gateway_timeout − max_clock_skew syncs but
// refuses readiness (and every fetch) with 503 not_ready saying why,
// because the coordinator would count it safe before it fenced itself.
func TestUnfitSyncTimeoutIsNotReady(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{beforeStart: func(h *harness) {
		h.sync.settings = testSettings()
		h.sync.settings.GatewayTimeoutMs, h.sync.settings.MaxClockSkewMs = 3500, 500 // 3s: not above sync_timeout 3s
	}})
	waitFor(t, "the settings", func() bool { return h.gw.follower.Unfit() != nil })
	r := h.get("", "/readyz")
	expectError(t, r, 503, api.CodeNotReady)
	if !strings.Contains(string(r.body), "sync_timeout 3s is not below") {
		t.Fatalf("/readyz says %s; want why", r.body)
	}
	good, _ := h.mint(capClaims(0))
	expectError(t, h.get(good, recordsPath(0, "offset=0")), 503, api.CodeNotReady)
}

// TestResetWithoutSettingsIsRefused: a reset that does not carry the
// coordinator's settings (a coordinator older than the gateway) is not
// applied: nothing could be verified, so the gateway stays not ready.
func TestResetWithoutSettingsIsRefused(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{beforeStart: func(h *harness) { h.sync.settings = nil }})
	h.sync.waitPolls(t, 2) // the first reset was refused, the poll retried
	expectError(t, h.get("", "/readyz"), 503, api.CodeNotReady)
	if h.gw.verifier.Load() != nil {
		t.Fatal("a verifier was built without the coordinator's settings")
	}
}
