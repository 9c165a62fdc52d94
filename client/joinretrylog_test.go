package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/coordinators/coordinatorstest"
)

// TestFirstJoinRetryIsLoggedAtOnce: a first join to a coordinator that is
// not running is retried until join_timeout (30 s by default), and the
// first failure is logged at WARN at once, with its reason and the time
// left — `capgate consume` with a wrong --coordinator said nothing for 30
// s before (ha13's join_timeout made the silent wait 3× longer).
func TestFirstJoinRetryIsLoggedAtOnce(t *testing.T) {
	e := newEnv(t, func(int) []api.Grant { return nil })
	cfg := e.config()
	cfg.CoordinatorURL = coordinatorstest.Down(t)
	cfg.JoinTimeout = time.Minute // far past this test: the line must come long before
	core, logs := observer.New(zapcore.WarnLevel)
	c, err := NewConsumer(cfg, WithLogger(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	joined := make(chan error, 1)
	go func() { joined <- c.Join(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	var line []observer.LoggedEntry
	for time.Now().Before(deadline) {
		if line = logs.FilterMessage("join failed; retrying until join_timeout").All(); len(line) > 0 {
			break
		}
		select {
		case err := <-joined:
			t.Fatalf("join ended %v before any retry was logged", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-joined; err == nil || !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "canceled") {
		t.Errorf("join after cancel: %v", err)
	}
	if len(line) != 1 {
		t.Fatalf("%d retry lines within 10 s (want 1, at the first failure): %v", len(line), logs.All())
	}
	f := line[0].ContextMap()
	if msg, _ := f["error"].(string); !strings.Contains(msg, "refused") && !strings.Contains(msg, "reachable") {
		t.Errorf("the line's error %q does not say the coordinator could not be reached", msg)
	}
	if left, _ := f["until_join_timeout"].(time.Duration); left <= 50*time.Second || left > time.Minute {
		t.Errorf("until_join_timeout %v, want the minute's rest", f["until_join_timeout"])
	}
}
