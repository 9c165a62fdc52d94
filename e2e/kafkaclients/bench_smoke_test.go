package kafkaclients

import (
	"testing"
	"time"
)

// TestBenchmarksSmoke runs every benchmark scenario of bench_test.go with
// tiny sizes and checks it for sense, so `go test ./...` keeps them
// working: every path consumed every record, every fetch got its record,
// every rebalance settled with exactly the members' final assignments.
func TestBenchmarksSmoke(t *testing.T) {
	for _, r := range throughputRun(t, 2_000, 1) {
		if r.rps <= 0 || len(r.all) != 1 {
			t.Errorf("%s: %v records/s over %d passes", r.path, r.rps, len(r.all))
		}
	}
	direct, listener := latencyRun(t, 20, 50)
	if len(direct) != 50 || len(listener) != 50 {
		t.Errorf("latency: %d direct and %d listener fetches timed, want 50 each", len(direct), len(listener))
	}
	for _, p := range rebalanceRun(t, 1) {
		if len(p.took) != 1 || p.took[0] <= 0 || p.took[0] > 30*time.Second {
			t.Errorf("%s: join → stable %v", p.name, p.took)
		}
	}
}
