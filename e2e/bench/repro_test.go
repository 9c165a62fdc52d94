package bench

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/coordinator"
)

// Reproductions of the bugs BENCHMARKS.md reports, kept as regression
// tests now that both are fixed (bug 1: gateway sync_wait validation and
// default; bug 2: the SDK chunks commits). They take tens of seconds, so
// they run only with CAPGATE_BENCH_REPRO=1.

func repro(t *testing.T) {
	if os.Getenv("CAPGATE_BENCH_REPRO") == "" {
		t.Skip("set CAPGATE_BENCH_REPRO=1 to run the bug reproductions")
	}
}

// Bug 1: with the shipped gateway sync_wait (5s) and sync_timeout (10s),
// an idle gateway's poll is held the full 5s, so the next answer lands
// just after sent+10s: for those milliseconds, before every answered
// poll, every fetch is refused 503 out_of_sync.
func TestReproIdleGatewayOutOfSync(t *testing.T) {
	repro(t)
	s := startStack(t, stackOptions{Topics: map[string]int32{latencyTopic: 1}, Gateways: 1, ShippedSyncWait: true})
	e := &overheadEnv{s: s, latencyLen: 1, caps: map[string]string{}}
	e.hc = newHostClient(s.GatewayURLs[0])
	produceOneByOne(t, s.Broker, latencyTopic, 1)
	e.grant(t, latencyTopic, 0)
	fetch := e.gatewayFetch(false)
	refused, start := 0, time.Now()
	for time.Since(start) < 21*time.Second {
		if err := fetch(0); err != nil {
			if !strings.Contains(err.Error(), string(api.CodeOutOfSync)) {
				t.Fatal(err)
			}
			refused++
			t.Logf("%6.3fs: %v", time.Since(start).Seconds(), err)
		}
		time.Sleep(200 * time.Microsecond)
	}
	if refused > 0 {
		t.Errorf("an idle, healthy gateway refused %d fetches with 503 out_of_sync in 21s", refused)
	}
}

// Bug 2: a commit naming many partitions is refused 413 body_too_large
// by the coordinator (max_body_bytes 1 MiB, ~700 bytes per capability),
// and the SDK sends its final release commit as one request: an SDK
// consumer holding 2,000 partitions closes "cleanly" (nil error) but
// commits nothing, so the next holder starts over from the last commit.
func TestReproSDKCloseCommitsNothing(t *testing.T) {
	repro(t)
	const group, partitions = "big-g", 2000
	s := startStack(t, stackOptions{Topics: map[string]int32{scaleTopic: partitions}, Gateways: 1})
	cfg := client.DefaultConfig()
	cfg.CoordinatorURL, cfg.Gateways = s.CoordinatorURL, s.GatewayURLs
	cfg.Group, cfg.Topics, cfg.Credential = group, []string{scaleTopic}, s.credential(t, group)
	c, err := client.NewConsumer(cfg, client.WithLogger(logger(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Join(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(c.Assigned()); n != partitions {
		t.Fatalf("holds %d partitions, want %d", n, partitions)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	var d coordinator.GroupDescription
	if _, err := s.admin(http.MethodGet, "/v1/admin/groups/"+group, nil, &d); err != nil {
		t.Fatal(err)
	}
	committed := 0
	for _, p := range d.Partitions {
		if p.Committed != nil {
			committed++
		}
	}
	if committed != partitions {
		t.Errorf("Close returned nil but %d of %d partitions have a committed offset (CAPGATE_BENCH_LOG=warn shows the 413)", committed, partitions)
	}
}
