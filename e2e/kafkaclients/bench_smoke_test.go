package kafkaclients

import (
	"slices"
	"testing"
	"time"
)

// TestBenchmarksSmoke runs every benchmark scenario of bench_test.go with
// tiny sizes and checks it for sense, so `go test ./...` keeps them
// working: every path consumed every record, every fetch got its record,
// every rebalance settled with exactly the members' final assignments.
func TestBenchmarksSmoke(t *testing.T) {
	run := throughputRun(t, throughputSize{perPartition: 2_000, rounds: 2})
	for _, pr := range run.pairs {
		for _, p := range []*throughputPath{pr.direct, pr.listener} {
			if len(p.rps) != 2 || slices.Min(p.rps) <= 0 || slices.Min(p.steady) < 0 || slices.Min(p.cpu) <= 0 {
				t.Errorf("%s: records/s %v steady %v cpu %v, want 2 rounds, positive (steady: the first poll may hold every record)", p.path, p.rps, p.steady, p.cpu)
			}
			if w := p.wire; w[clientFetches] <= 0 || w[clientReadBytes] < int64(2*p.records*recordBytes) || w[clientBatches] <= 0 || w[kafkaFetches] <= 0 {
				t.Errorf("%s: wire counts %v: want the client's Fetches, its batches and at least the records' bytes read, and Kafka's Fetches", p.path, w)
			}
		}
		if rs := pr.ratios(); len(rs) != 2 || slices.Min(rs) <= 0 {
			t.Errorf("%s: ratios %v", pr.key, rs)
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
