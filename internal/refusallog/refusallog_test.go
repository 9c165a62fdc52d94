package refusallog

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A flood of refusals logs a burst, then counts: the next line logged
// says how many were suppressed.
func TestRefusalsAreRateLimited(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := New(zap.New(core))
	now := time.Now()
	l.now = func() time.Time { return now }
	for range 1000 {
		l.Refused("sync token", "not a known sync token", zap.String("gateway", "gw-1"))
	}
	if n := logs.Len(); n != Burst {
		t.Fatalf("%d lines for 1,000 refusals, want about the burst of %d", n, Burst)
	}
	line := logs.All()[0]
	if line.Message != "sync token refused" || line.Level != zapcore.WarnLevel || line.ContextMap()["reason"] != "not a known sync token" {
		t.Fatalf("line: %v %v %v", line.Level, line.Message, line.ContextMap())
	}
	now = now.Add(time.Second) // one more line allowed
	l.Refused("sync token", "not a known sync token")
	last := logs.All()[logs.Len()-1]
	if n, _ := last.ContextMap()["suppressed"].(int64); logs.Len() != Burst+1 || n != 1000-Burst {
		t.Fatalf("suppressed %v after %d lines for 1,001 refusals", last.ContextMap()["suppressed"], logs.Len())
	}
}
