package ops_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/gateway"
	"github.com/capgate/capgate/internal/stack"
)

// opsStack is a stack on loopback (kfake, an in-process coordinator and
// gateway, real sockets) whose parts' logs are kept for the test.
type opsStack struct {
	s    *stack.Stack
	core zapcore.Core // every part's logs go to it, kept in logs
	logs *observer.ObservedLogs
}

type opsOptions struct {
	coordinator func(*coordinator.Config)
	gateway     func(*gateway.Config)
	gateways    int
}

func startOps(t *testing.T, topics map[string]int32) *opsStack {
	return startOpsWith(t, topics, opsOptions{gateways: 1})
}

func startOpsWith(t *testing.T, topics map[string]int32, opts opsOptions) *opsStack {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	sopts := stack.Options{
		Dir: t.TempDir(), Topics: topics, Gateways: opts.gateways,
		Logger: func(part string) *zap.Logger { return zap.New(core).Named(part) },
	}
	if opts.coordinator != nil {
		sopts.Coordinator = func(_ int, cfg *coordinator.Config) { opts.coordinator(cfg) }
	}
	if opts.gateway != nil {
		sopts.Gateway = func(_ int, cfg *gateway.Config) { opts.gateway(cfg) }
	}
	s, err := stack.Start(context.Background(), sopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("stack: %v", err)
		}
	})
	return &opsStack{s: s, core: core, logs: logs}
}

// waitSynced waits until every gateway acknowledged the coordinator's
// current sync sequence.
func (o *opsStack) waitSynced(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	seq, err := o.s.SyncSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 20*time.Second, "gateways to apply the sync", func() (bool, string) {
		ok, why, err := o.s.Acked(ctx, seq)
		if err != nil {
			return false, err.Error()
		}
		return ok, why
	})
}
