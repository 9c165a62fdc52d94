package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDemoFailover runs `capgate dev --demo --replicas 3 --kill-leader 6s`
// in this process: three coordinator replicas on the embedded Kafka, the
// leader stopped 6 s in (after the 4th consumer joined); another replica takes over, the consumers keep
// their sessions, and the demo's summary holds (nothing lost or repeated,
// no unmoved partition paused beyond the tolerance, the takeover made).
//
// The tolerance is #11's target for unmoved partitions across a failover
// (1 s), not the demo's 50 ms default: the test is about the failover's
// behaviour, and on a loaded 2-core machine a CPU stall pauses every
// partition at once by more than 50 ms (it failed 3 of 6 runs at load
// ~13). The figure itself is measured by e2e/ha BenchmarkFailover.
func TestDemoFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := runDev(ctx, &out, devFlags{
		dataDir: t.TempDir(), brokerAddr: "127.0.0.1:0", coordinatorAddr: "127.0.0.1:0", gatewayAddr: "127.0.0.1:0", kafkaAddr: "127.0.0.1:0",
		logLevel: "error", demo: true, demoDuration: 12 * time.Second, demoTolerance: time.Second,
		replicas: 3, killLeader: 6 * time.Second,
	})
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^  replicas: +http://\S+,http://\S+,http://\S+ `),
		regexp.MustCompile(`(?m)failover: coordinator(-\d)? \(leader\) stopped$`),
		regexp.MustCompile(`(?m)failover: coordinator(-\d)? leads, \d+ ms after the stop$`),
		regexp.MustCompile(`(?m)^failover: +coordinator(-\d)? stopped, coordinator(-\d)? leading \d+ ms later`),
	} {
		if !want.MatchString(text) {
			t.Errorf("no line matching %s", want)
		}
	}
	if !strings.Contains(text, " ok=true") {
		t.Error("the summary does not hold")
	}
}
