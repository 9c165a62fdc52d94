package gateway

import (
	"fmt"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/internal/coordinators/coordinatorstest"
)

// TestSyncFailuresAreNotOneWarningEach: a gateway whose coordinator is
// down polls about once a second, and each failed poll was a "sync
// failed" warning — 3,600 lines an hour of one outage (newuser10). The
// first few are logged, then one per 30 s with how many were suppressed;
// the metric counts every one.
func TestSyncFailuresAreNotOneWarningEach(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.ID, cfg.Listen = "gw-down", "127.0.0.1:0"
	cfg.CoordinatorURL, cfg.SyncToken = coordinatorstest.Down(t), "sync-token"
	core, logs := observer.New(zap.WarnLevel)
	g := startGateway(t, cfg, zap.New(core))
	const polls = 8
	waitFor(t, fmt.Sprintf("%d failed sync polls", polls), func() bool {
		return counterValue(t, g.metrics.syncPolls.WithLabelValues("error")) >= polls
	})
	if n := logs.FilterMessage("sync failed").Len(); n > syncFailBurst {
		t.Errorf("%d failed polls logged %d \"sync failed\" warnings, want at most %d", polls, n, syncFailBurst)
	}
	if n := logs.FilterMessage("sync failed").Len(); n == 0 {
		t.Error("no \"sync failed\" warning at all: an outage must be told")
	}
}
