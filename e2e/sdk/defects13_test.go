package sdk_test

// Issue #13's SDK defects, each on a real cluster (kfake, coordinator and
// gateways on loopback sockets).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/internal/stack"
)

// produceTo writes n records to partition p of the cluster's topic.
func produceTo(t *testing.T, c *sdk.Cluster, p int32, n int) {
	t.Helper()
	records := make([]*kgo.Record, n)
	for i := range records {
		records[i] = &kgo.Record{Value: []byte(fmt.Sprintf("v%d", i))}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Broker.Produce(ctx, c.Topic, p, records); err != nil {
		t.Fatal(err)
	}
}

// committed is the committed offset of partition p of group (-1: none).
func committed(t *testing.T, c *sdk.Cluster, group string, p int32) int64 {
	t.Helper()
	for _, v := range c.Describe(t, group).Partitions {
		if v.Partition == p && v.Committed != nil {
			return *v.Committed
		}
	}
	return -1
}

// TestCommitNearExpiryIsNotDropped: with heartbeats held (no renewal),
// the capability of the partition passes its expiry; Commit then commits
// it (the coordinator's leeway still accepts it) or returns the refusal —
// the bug left the partition out and returned nil, nothing committed.
func TestCommitNearExpiryIsNotDropped(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "expiry", Partitions: 1})
	produceTo(t, c, 0, 10)
	m := c.NewMember(t, sdk.MemberOptions{Name: "m", Group: "expiry", Configure: func(cfg *client.Config) {
		cfg.CommitInterval = 0 // only the Commit under test commits
	}})
	sdk.Eventually(t, wait, "10 records delivered", func() (bool, string) {
		return len(m.Deliveries()) == 10, fmt.Sprintf("%d delivered", len(m.Deliveries()))
	})
	release := m.Transport.Hold("heartbeat") // no renewals from now on
	defer release()
	var expires time.Time // the latest capability's (a renewal already on its way is used by a fetch)
	sdk.Eventually(t, wait, "the capability expired", func() (bool, string) {
		for _, f := range m.Transport.Fetches() {
			if f.Expires.After(expires) {
				expires = f.Expires
			}
		}
		return time.Now().After(expires.Add(100 * time.Millisecond)), "expires at " + expires.String()
	})
	m.StopPolling() // the 10 records are processed (their Poll returned, the next began)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := m.Consumer.Commit(ctx)
	got := committed(t, c, "expiry", 0)
	t.Logf("commit %s after the capability's expiry: %v; committed %d", time.Since(expires).Round(time.Millisecond), err, got)
	if err == nil && got != 10 {
		t.Fatalf("Commit returned nil but the committed offset is %d, want 10: the expiring partition was dropped", got)
	}
	var e *client.Error
	if err != nil && !errors.As(err, &e) {
		t.Fatalf("commit failed with %v, want the coordinator's refusal", err)
	}
}

// TestCommitRetriedThroughCoordinatorBlip: the coordinator stops while a
// commit is due and comes back a moment later; Commit retries with
// backoff (within request_timeout) and succeeds, and the
// consumer keeps consuming — the bug made the CLI exit on the first
// failed commit.
func TestCommitRetriedThroughCoordinatorBlip(t *testing.T) {
	t.Parallel()
	tm := sdk.DefaultTiming()
	tm.CapabilityLease = time.Minute
	c := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "blip", Partitions: 2, Timing: tm})
	produceTo(t, c, 0, 5)
	m := c.NewMember(t, sdk.MemberOptions{Name: "m", Group: "blip", Configure: func(cfg *client.Config) {
		cfg.CommitInterval = 0
	}})
	sdk.Eventually(t, wait, "5 records delivered", func() (bool, string) {
		return len(m.Deliveries()) == 5, fmt.Sprintf("%d delivered", len(m.Deliveries()))
	})
	if err := c.Coordinator().Stop(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done <- m.Consumer.Commit(ctx)
	}()
	sdk.Eventually(t, wait, "the commit was refused at least once", func() (bool, string) {
		n := m.Transport.Calls("commit")
		return n >= 2, fmt.Sprintf("%d commit attempts", n)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Coordinator().Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("commit across the blip: %v", err)
	}
	if got := committed(t, c, "blip", 0); got != 5 {
		t.Fatalf("committed %d after the blip, want 5", got)
	}
	produceTo(t, c, 1, 3)
	sdk.Eventually(t, wait, "the consumer consumed on after the blip", func() (bool, string) {
		if err := m.PollErr(); err != nil {
			return false, err.Error()
		}
		return len(m.Deliveries()) == 8, fmt.Sprintf("%d delivered", len(m.Deliveries()))
	})
	t.Logf("%d commit attempts across the blip", m.Transport.Calls("commit"))
}

// countingTransport counts the requests it sends.
type countingTransport struct {
	next  http.RoundTripper
	calls atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	return c.next.RoundTrip(r)
}

// TestTLSCertificateErrorFailsFast: a consumer that does not trust the
// coordinator's certificate (another CA) fails its join on the first
// attempt with the certificate error, even with a long request_timeout —
// the bug retried the handshake until the deadline.
func TestTLSCertificateErrorFailsFast(t *testing.T) {
	t.Parallel()
	pki, err := stack.NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	opts := stack.Options{Dir: t.TempDir(), Topics: map[string]int32{"tls": 1}, Gateways: 1, Timing: sdk.DefaultTiming(),
		Logger: func(part string) *zap.Logger { return sdk.Logger(t).Named(part) }}
	if err := pki.Apply(&opts); err != nil {
		t.Fatal(err)
	}
	s, err := stack.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	cred, err := s.ClientCredential(context.Background(), "tls", []string{"tls"}, []string{"tls"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := stack.NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := other.Client("")
	if err != nil {
		t.Fatal(err)
	}
	tc, err := wrong.TLS(zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	counter := &countingTransport{next: &http.Transport{TLSClientConfig: tc}}
	cfg := s.ClientConfig("tls", []string{"tls"}, cred)
	cfg.RequestTimeout = time.Minute
	consumer, err := client.NewConsumer(cfg, client.WithHTTPClient(&http.Client{Transport: counter}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err = consumer.Join(ctx)
	if ctx.Err() != nil {
		t.Fatalf("join still retrying after %s", time.Since(start))
	}
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("join: %v, want the certificate error", err)
	}
	if n := counter.calls.Load(); n != 1 {
		t.Fatalf("%d join attempts, want 1 (a certificate error is not retried)", n)
	}
	t.Logf("join failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
	consumer.Close(context.Background())
}

// establishedTo counts this machine's established TCP connections whose
// remote end is 127.0.0.1:port (a client's sockets to that server).
func establishedTo(t *testing.T, port int) int {
	t.Helper()
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := fmt.Sprintf("0100007F:%04X", port)
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 3 && fields[2] == want && fields[3] == "01" {
			n++
		}
	}
	return n
}

// TestCloseLeavesNoSpareConnections: a consumer with its own HTTP client
// (the default) fetching ahead keeps several keep-alive connections to
// the gateway; after Close none is left open (the bug left the spare
// ones for the gateway to time out).
func TestCloseLeavesNoSpareConnections(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "spare", Partitions: 4})
	for p := range int32(4) {
		produceTo(t, c, p, 200)
	}
	u, err := url.Parse(c.GatewayURLs()[0])
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	c.HTTP().CloseIdleConnections() // the stack's own readiness probes
	before := establishedTo(t, port)
	cfg := c.ClientConfig(sdk.MemberOptions{Group: "spare"}, c.ClientCredential(t, "spare"))
	consumer, err := client.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := consumer.Join(ctx); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 800; {
		records, err := consumer.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got += len(records)
	}
	open := establishedTo(t, port) - before
	if open < 2 {
		t.Fatalf("%d connections to the gateway while consuming 4 partitions; the test needs several", open)
	}
	if err := consumer.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if left := establishedTo(t, port) - before; left != 0 {
		t.Fatalf("%d of %d connections to the gateway still open after Close", left, open)
	}
	t.Logf("%d connections to the gateway while consuming, none after Close (%d of others before)", open, before)
}

// TestLagCountsNeverCommittedPartitions: a partition the group never
// committed lags from where its holder starts (the earliest offset) —
// the bug left it out of the lag, so a fresh group showed "lag 0".
func TestLagCountsNeverCommittedPartitions(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "lag", Partitions: 2})
	produceTo(t, c, 0, 7)
	m := c.NewMember(t, sdk.MemberOptions{Name: "m", Group: "lag", Configure: func(cfg *client.Config) {
		cfg.CommitInterval = 0
	}})
	m.StopPolling() // nothing processed, nothing committed
	var total int64
	for _, p := range c.Describe(t, "lag").Partitions {
		if p.Committed != nil {
			t.Fatalf("lag/%d committed %d; the test needs partitions never committed", p.Partition, *p.Committed)
		}
		if p.Lag == nil {
			t.Fatalf("lag/%d: no lag for a partition never committed", p.Partition)
		}
		total += *p.Lag
	}
	if total != 7 {
		t.Fatalf("group lag %d, want 7 (partition 0 from its start, partition 1 empty)", total)
	}
}
