package cli_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestThrottledConsumeLogsTheThrottleOnce: an operator slows a group down
// as README's walk-through does (`capgate admin qos --group G
// --max-bytes-per-sec N`) and `capgate consume` reads through it at that
// rate. Every gateway answer beyond the rate is 429 rate_limited, which
// the consumer retries after Retry-After; it says so once, then at most
// once per 10 s with the count of refusals not logged — it printed one
// WARN "fetch refused" per partition and retry (41 lines in 12 s for one
// group), where a Kafka consumer under a quota says nothing. The same
// bound holds for every retriable refusal (503 out_of_sync while the
// coordinator is down past sync_timeout printed 12 lines a second).
func TestThrottledConsumeLogsTheThrottleOnce(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	const n = 300
	d.produceBatches(t, 4, n)
	d.adminCLI(t, "qos", "--group", "throttled", "--max-bytes-per-sec", "8000")

	start := time.Now()
	stderr := d.consumeAll(t, "throttled", n, 60*time.Second)
	took := time.Since(start)
	refused := 0
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "fetch refused") && strings.Contains(line, `"code": "rate_limited"`) {
			refused++
		}
	}
	if refused == 0 {
		// 30 KB at 8000 B/s: the rate must have been hit, or this test
		// proves nothing about its log.
		t.Fatalf("consume took %s and logged no rate_limited refusal: was the group throttled?\nstderr:\n%s", took.Round(time.Millisecond), stderr)
	}
	if most := 1 + int(took/(10*time.Second)); refused > most {
		t.Fatalf("%d \"fetch refused\" rate_limited lines in %s of throttled consuming, want at most %d (the first, then one per 10 s):\n%s",
			refused, took.Round(time.Millisecond), most, stderr)
	}
	d.stop(true)
}

// produceBatches writes n records of about 100 bytes to partition p of
// demo with capgate produce, in batches of 50 (about 5 KB): a fetch reads
// one, so a byte rate shows between them.
func (d *devProcess) produceBatches(t *testing.T, p, n int) {
	t.Helper()
	var lines strings.Builder
	for i := range n {
		fmt.Fprintf(&lines, "%03d-%s\n", i, strings.Repeat("x", 96))
	}
	run(t, 30*time.Second, lines.String(), d.produceArgs("--partition", fmt.Sprint(p), "--batch-records", "50")...)
}

// consumeAll runs capgate consume of group from the start until it
// printed n records, within timeout, and returns its stderr.
func (d *devProcess) consumeAll(t *testing.T, group string, n int, timeout time.Duration) string {
	t.Helper()
	p := startConsume(t, d.consumeArgs(group, "--offset", "start", "--max-records", fmt.Sprint(n))...)
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("consume of %d records still running after %s: throttled?\nstderr:\n%s", n, timeout, p.stderr.String())
	}
	if p.err != nil {
		t.Fatalf("consume: %v\nstderr:\n%s", p.err, p.stderr.String())
	}
	if got := len(parseConsumed(t, p.stdout.String())); got != n {
		t.Fatalf("printed %d records, want %d", got, n)
	}
	return p.stderr.String()
}
