package sdk_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/internal/stack"
)

// sharedRun is what runConsumers saw: the most connections the process
// held to the gateway, and how long the consumers took to read.
type sharedRun struct {
	peak     int
	read     time.Duration // from the first join to every record read
	consumed []int         // partitions each consumer read a record of
}

// runConsumers starts consumers consumers of one process (one group
// each, the SDK's own HTTP client, every option default but a 1 s fetch
// wait) on a topic of partitions partitions holding a record each, waits
// until each read every partition, and watches the connections to the
// gateway until window after that.
func runConsumers(t testing.TB, consumers int, partitions int32, window time.Duration, opts ...client.Option) sharedRun {
	tm := sdk.DefaultTiming()
	tm.CapabilityLease = time.Minute // fewer renewals on a loaded machine
	c := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "shared", Partitions: partitions, Timing: tm})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for p := range partitions {
		if _, err := c.Broker.Produce(ctx, c.Topic, p, []*kgo.Record{{Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
	}
	u, err := url.Parse(c.GatewayURLs()[0])
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	c.HTTP().CloseIdleConnections() // the stack's own readiness probes

	var peak atomic.Int64
	samples := make(chan struct{}, 1)
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if n := int64(clientSocketsTo(port)); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case samples <- struct{}{}:
			default:
			}
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { close(stopSampling); <-sampled }()

	read := make([]sync.Map, consumers) // partition → true
	var counts []*atomic.Int64
	var started []*stack.Consumer
	var mu sync.Mutex
	defer func() {
		var wg sync.WaitGroup
		for _, s := range started {
			wg.Add(1)
			go func() {
				defer wg.Done()
				closeCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				if err := s.Close(closeCtx); err != nil {
					t.Errorf("close: %v", err)
				}
			}()
		}
		wg.Wait()
	}()
	start := time.Now()
	var joins sync.WaitGroup
	errs := make(chan error, consumers)
	for i := range consumers {
		n := &atomic.Int64{}
		counts = append(counts, n)
		joins.Add(1)
		go func() {
			defer joins.Done()
			group := fmt.Sprintf("shared-%d", i)
			cfg := c.Stack.ClientConfig(group, []string{c.Topic}, c.ClientCredential(t, group))
			cfg.FetchMaxWait = time.Second
			cfg.RequestTimeout = time.Minute // the join answer carries every capability
			s, err := stack.StartConsumer(ctx, stack.ConsumerOptions{Config: cfg, Options: opts,
				OnRecords: func(_ string, rs []client.Record, _ time.Time) {
					for _, r := range rs {
						if _, seen := read[i].LoadOrStore(r.Partition, true); !seen {
							n.Add(1)
						}
					}
				}})
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			started = append(started, s)
			mu.Unlock()
		}()
	}
	joins.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sdk.Eventually(t, 8*time.Minute, "every consumer read every partition", func() (bool, string) {
		var behind []string
		for i, n := range counts {
			if got := n.Load(); got < int64(partitions) {
				behind = append(behind, fmt.Sprintf("consumer %d: %d", i, got))
			}
		}
		for _, s := range started {
			if err := s.Err(); err != nil {
				t.Fatalf("poll: %v", err)
			}
		}
		return len(behind) == 0, fmt.Sprintf("%d of %d consumers behind (of %d partitions each; peak %d connections): %s",
			len(behind), consumers, partitions, peak.Load(), strings.Join(behind[:min(len(behind), 5)], ", "))
	})
	run := sharedRun{read: time.Since(start)}
	// Idle long polls from now on: watch them for window (a measurement
	// over a span, not a wait for an event).
	for end := time.Now().Add(window); time.Now().Before(end); {
		<-samples
	}
	run.peak = int(peak.Load())
	for _, n := range counts {
		run.consumed = append(run.consumed, int(n.Load()))
	}
	return run
}

// clientSocketsTo counts the established TCP connections to
// 127.0.0.1:port, each once: /proc/net/tcp is not read in one piece,
// and while sockets come and go a read can list one twice (a consumer's
// 1,024 distinct sockets were once counted 1,324).
func clientSocketsTo(port int) int {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return 0
	}
	want := fmt.Sprintf("0100007F:%04X", port)
	seen := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 3 && fields[2] == want && fields[3] == "01" {
			seen[fields[1]] = true
		}
	}
	return len(seen)
}

// TestConsumersOfOneProcessShareTheGateway: 50 consumers of 40
// partitions each in one process hold at most the default pool's 1,024
// connections to a gateway, and every one of them reads every partition.
// Before, each consumer had its own bound and its own connections: the
// 50 held some 2,010, past the gateway's max_connections_per_address
// (2,000), and the 51st consumer of the process found the gateway
// refusing it.
func TestConsumersOfOneProcessShareTheGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 long polls")
	}
	const consumers, partitions = 50, 40
	run := runConsumers(t, consumers, partitions, 3*time.Second)
	t.Logf("%d consumers × %d partitions: peak %d connections to the gateway, all read in %v",
		consumers, partitions, run.peak, run.read.Round(time.Millisecond))
	// The pool's fetches, and a few for connections the transport is
	// still closing as new ones open.
	if limit := client.DefaultFetchPoolMax + 16; run.peak > limit {
		t.Fatalf("%d connections to the gateway at the peak, want at most %d (the process's pool)", run.peak, limit)
	}
}

// BenchmarkConnectionsToAGateway: the connections consumers of one
// process hold to a gateway (consumers × partitions), at the peak
// ("conns") and the time until every consumer read every partition
// ("read-ms"); -benchtime 1x is enough (BENCHMARKS.md). A benchmark, not
// a test behind an environment variable: CI never set one, so it checked
// nothing there.
func BenchmarkConnectionsToAGateway(b *testing.B) {
	for _, shape := range []struct {
		consumers  int
		partitions int32
	}{{1, 40}, {10, 40}, {50, 40}, {1, 2000}} {
		b.Run(fmt.Sprintf("%dx%d", shape.consumers, shape.partitions), func(b *testing.B) {
			var peak, read float64
			for range b.N {
				run := runConsumers(b, shape.consumers, shape.partitions, 5*time.Second)
				peak, read = max(peak, float64(run.peak)), read+float64(run.read.Milliseconds())
			}
			b.ReportMetric(peak, "conns")
			b.ReportMetric(read/float64(b.N), "read-ms")
		})
	}
}

// fetchStarts counts the fetches (GET …/records) a consumer's HTTP client
// sends, and calls onStart and onEnd (if set) around each.
type fetchStarts struct {
	next           http.RoundTripper
	n              atomic.Int64
	onStart, onEnd func()
}

func (f *fetchStarts) RoundTrip(r *http.Request) (*http.Response, error) {
	fetch := strings.HasSuffix(r.URL.Path, "/records")
	if fetch {
		f.n.Add(1)
		if f.onStart != nil {
			f.onStart()
		}
	}
	resp, err := f.next.RoundTrip(r)
	if fetch && f.onEnd != nil {
		f.onEnd()
	}
	return resp, err
}

// TestFetchPoolIsFairToASinglePartition: two consumers of one process
// share a pool of 4 fetch slots to a gateway; one holds 60 idle
// partitions (60 long polls for 4 slots), the other one idle partition.
// Each time the single partition's long poll ends and it asks again, its
// next fetch is sent after at most a few of the other's: the slot freed
// next goes to the consumer holding fewest. In order of arrival it waited
// for every fetch queued before it (some 56, a dozen seconds of long
// polls); served in turns that stay with a consumer while it has fetches
// waiting, it never got one. (Each consumer on an HTTP client of its own
// here, to count its requests: the pool's slots are shared all the same.)
func TestFetchPoolIsFairToASinglePartition(t *testing.T) {
	t.Parallel()
	const wide = 60
	c := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "wide", Partitions: wide, OtherTopics: map[string]int32{"narrow": 1}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cred, err := c.Stack.ClientCredential(ctx, "e2e-fair", []string{"wide", "narrow"}, []string{"wide", "narrow"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pool := client.NewFetchPool(4)
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	wideFetches := &fetchStarts{next: base}
	var mu sync.Mutex
	var gaps []int64 // the wide consumer's fetches sent while the narrow one's waited
	lastEnd := int64(-1)
	narrowFetches := &fetchStarts{next: base,
		onStart: func() {
			mu.Lock()
			defer mu.Unlock()
			if lastEnd >= 0 {
				gaps = append(gaps, wideFetches.n.Load()-lastEnd)
			}
		},
		onEnd: func() {
			mu.Lock()
			defer mu.Unlock()
			lastEnd = wideFetches.n.Load()
		}}
	start := func(group, topic string, rt http.RoundTripper) {
		cfg := c.Stack.ClientConfig(group, []string{topic}, cred)
		cfg.FetchMaxWait, cfg.FetchAhead = time.Second, false
		s, err := stack.StartConsumer(ctx, stack.ConsumerOptions{Config: cfg, HTTP: &http.Client{Transport: rt},
			Options: []client.Option{client.WithFetchPool(pool)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			closeCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := s.Close(closeCtx); err != nil {
				t.Errorf("close %s: %v", group, err)
			}
		})
	}
	start("wide", "wide", wideFetches)
	sdk.Eventually(t, time.Minute, "the wide consumer's long polls queue", func() (bool, string) {
		n := wideFetches.n.Load()
		return n >= 2*4, fmt.Sprintf("%d fetches sent", n)
	})
	start("narrow", "narrow", narrowFetches)
	const rounds = 4
	sdk.Eventually(t, 4*time.Minute, "the narrow consumer's fetches", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(gaps) >= rounds, fmt.Sprintf("%d of %d; the wide consumer sent %d fetches", len(gaps), rounds, wideFetches.n.Load())
	})
	mu.Lock()
	seen := slices.Clone(gaps[:rounds])
	mu.Unlock()
	t.Logf("the wide consumer's fetches sent while the narrow one's waited: %v", seen)
	slices.Sort(seen)
	// Turns give a few (the slot its own long poll freed goes to the
	// wide consumer, and whatever ends while its next fetch is being
	// asked for on a loaded machine); in order of arrival, ~56.
	if median := seen[rounds/2]; median > 12 {
		t.Fatalf("the wide consumer sent a median of %d fetches while the narrow one's waited (%v), want a few", median, seen)
	}
}

// BenchmarkStartup: the time from NewConsumer to its join, its first
// record and a record of every partition, for consumers of 1 and 2,000
// partitions (a record in each), logged per round (-benchtime 1x: three
// rounds of each; -v shows the lines).
func BenchmarkStartup(b *testing.B) {
	for _, partitions := range []int32{1, 2000} {
		b.Run(strconv.Itoa(int(partitions)), func(b *testing.B) {
			for range b.N {
				measureStartup(b, partitions)
			}
		})
	}
}

func measureStartup(t testing.TB, partitions int32) {
	tm := sdk.DefaultTiming()
	tm.CapabilityLease = time.Minute
	c := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "startup", Partitions: partitions, Timing: tm})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for p := range partitions {
		if _, err := c.Broker.Produce(ctx, c.Topic, p, []*kgo.Record{{Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		group := fmt.Sprintf("startup-%d", round)
		cfg := c.Stack.ClientConfig(group, []string{c.Topic}, c.ClientCredential(t, group))
		cfg.RequestTimeout = time.Minute
		start := time.Now()
		consumer, err := client.NewConsumer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		built := time.Since(start)
		if err := consumer.Join(ctx); err != nil {
			t.Fatal(err)
		}
		joined := time.Since(start)
		var first time.Duration
		seen := map[int32]bool{}
		for len(seen) < int(partitions) {
			rs, err := consumer.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if first == 0 && len(rs) > 0 {
				first = time.Since(start)
			}
			for _, r := range rs {
				seen[r.Partition] = true
			}
		}
		all := time.Since(start)
		closeCtx, cancelClose := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := consumer.Close(closeCtx); err != nil {
			t.Fatal(err)
		}
		cancelClose()
		t.Logf("STARTUP %d partitions: built %v, joined %v, first record %v, every partition %v",
			partitions, built.Round(time.Microsecond), joined.Round(time.Microsecond), first.Round(time.Microsecond), all.Round(time.Millisecond))
	}
}
