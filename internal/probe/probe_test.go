package probe

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The first readiness check waits for a probe; later ones answer from the
// cached result and refresh a stale one in the background, one probe at a
// time, so a flood of /readyz costs Kafka one request.
func TestKafkaProbeCachesAndRefreshes(t *testing.T) {
	synctest.Test(t, testKafkaProbe)
}

func testKafkaProbe(t *testing.T) {
	var p Kafka
	down := errors.New("dial tcp: connection refused")
	now := time.Now()
	if got := p.Status(now, func() error { return down }); !strings.Contains(got, "connection refused") {
		t.Fatalf("first check with Kafka down: %q", got)
	}
	p.Record(time.Now(), nil) // the metadata poller read topics
	var calls atomic.Int32    // probes run on goroutines of their own
	if got := p.Status(time.Now(), func() error { calls.Add(1); return down }); got != "" || calls.Load() != 0 {
		t.Fatalf("a fresh success: %q after %d probes, want ok from the cache", got, calls.Load())
	}
	release := make(chan struct{})
	later := time.Now().Add(TTL)
	slow := func() error { calls.Add(1); <-release; return down }
	if got := p.Status(later, slow); got != "" {
		t.Fatalf("stale success while the probe runs: %q, want the cached ok", got)
	}
	if got := p.Status(later, slow); got != "" || calls.Load() > 1 {
		t.Fatalf("second check during the probe: %q, %d probes", got, calls.Load())
	}
	close(release)
	synctest.Wait() // the background probe has recorded its result
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d probes for one stale result", n)
	}
	if got := p.Status(time.Now(), slow); !strings.Contains(got, "connection refused") {
		t.Fatalf("after the probe failed: %q", got)
	}
}
