package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/internal/stack"
)

// TestConsumeRidesOutCoordinatorOutage: `capgate consume` keeps
// consuming while the coordinator is down for longer than the SDK's
// request_timeout (10 s) — the bug exited on the first commit that failed
// although its capabilities were valid. The coordinator (in this
// process, on a fixed address) comes back, the CLI's commits go through,
// and it exits cleanly having printed every record once; the group's
// committed offset is what it printed. Its heartbeat failures are logged
// at most once per 10 s (it logged one per retry, about every second,
// for as long as the coordinator was down), and the coordinator's return
// once (info).
func TestConsumeRidesOutCoordinatorOutage(t *testing.T) {
	t.Parallel()
	tm := stack.Timing{ // shipped defaults but long gateway self-fencing: fetches go on without the coordinator
		CapabilityLease: time.Minute, HeartbeatWait: time.Second, SessionTimeout: 30 * time.Second,
		HandoffTimeout: 5 * time.Second, GatewayTimeout: 40 * time.Second, MaxClockSkew: 500 * time.Millisecond,
		SyncWait: time.Second, SyncTimeout: 30 * time.Second, Leeway: 2 * time.Second,
	}
	s, err := stack.Start(context.Background(), stack.Options{Dir: t.TempDir(), Topics: map[string]int32{"blip": 1}, Gateways: 1, Timing: tm})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	cred, err := s.ClientCredential(context.Background(), "blip", []string{"blip"}, []string{"blip"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	credFile := filepath.Join(t.TempDir(), "credential")
	if err := os.WriteFile(credFile, []byte(cred), 0o600); err != nil {
		t.Fatal(err)
	}
	produce := func(from, n int) {
		t.Helper()
		records := make([]*kgo.Record, n)
		for i := range records {
			records[i] = &kgo.Record{Value: []byte(fmt.Sprintf("v%d", from+i))}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := s.Broker.Produce(ctx, "blip", 0, records); err != nil {
			t.Fatal(err)
		}
	}
	c := startConsume(t, "consume", "--group", "blip", "--topic", "blip", "--format", "json", "--credential-file", credFile,
		"--coordinator", s.CoordinatorURL(), "--gateways", s.GatewayURLs()[0], "--commit-interval", "200ms", "--log-level", "info")
	printed, running := c.printed, c.running
	produce(0, 10)
	eventually(t, 30*time.Second, "10 records printed", func() (bool, string) { return printed() >= 10, fmt.Sprint(printed()) })

	// Heartbeats fail from the moment Stop begins (a held one is cut), so
	// the failure lines' bound counts the outage from there: from Stop's
	// return it missed Stop's own time, and an outage near 20 s could
	// show a third line at its 20 s mark with 19.9 s measured.
	stopping := time.Now()
	if err := s.Coordinator().Stop(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	produce(10, 10)
	eventually(t, 30*time.Second, "10 more printed while the coordinator is down", func() (bool, string) {
		if ok, why := running(); !ok {
			t.Fatal(why)
		}
		return printed() >= 20, fmt.Sprint(printed())
	})
	// Past the SDK's request_timeout of commits that cannot be answered.
	eventually(t, 30*time.Second, "the outage outlasted request_timeout", func() (bool, string) {
		if ok, why := running(); !ok {
			t.Fatal(why)
		}
		return time.Since(down) > 11*time.Second, time.Since(down).String()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Coordinator().Start(ctx); err != nil {
		t.Fatal(err)
	}
	produce(20, 10)
	eventually(t, 30*time.Second, "10 more printed after the coordinator came back", func() (bool, string) {
		if ok, why := running(); !ok {
			t.Fatal(why)
		}
		return printed() >= 30, fmt.Sprint(printed())
	})
	eventually(t, 30*time.Second, "the consumer said the coordinator is back", func() (bool, string) {
		return strings.Contains(c.stderr.String(), "heartbeat answered again"), c.stderr.String()
	})
	outage := time.Since(stopping)
	c.interrupt(t)
	records := parseConsumed(t, c.stdout.String())
	seen := map[int64]bool{}
	for _, r := range records {
		if seen[r.Offset] {
			t.Errorf("offset %d printed twice", r.Offset)
		}
		seen[r.Offset] = true
	}
	if len(seen) != 30 {
		t.Fatalf("printed %d distinct records, want 30", len(seen))
	}
	d, err := s.Describe(ctx, "blip")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Partitions {
		if p.Committed == nil || *p.Committed != 30 {
			t.Fatalf("committed %v after the CLI printed 30 and left, want 30", p.Committed)
		}
	}
	stderr := c.stderr.String()
	if n := strings.Count(stderr, "heartbeat failed"); n < 1 || n > int(outage/(10*time.Second))+1 {
		t.Errorf("%d heartbeat failure lines in an outage of at most %s, want one, then at most one per 10 s:\n%s", n, outage.Round(time.Second), stderr)
	}
	if n := strings.Count(stderr, "heartbeat answered again: the coordinator is back"); n != 1 {
		t.Errorf("the coordinator's return logged %d times, want once:\n%s", n, stderr)
	}
	t.Logf("outage ridden out; %d warnings on stderr while the coordinator was away:\n%s", strings.Count(stderr, "WARN"), stderr)
}
