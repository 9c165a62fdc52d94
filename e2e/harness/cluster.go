package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/coordinator"
)

const sigTerm = syscall.SIGTERM

// Options describe the deployment Start builds.
type Options struct {
	// Topic and Partitions name the one topic created in Kafka (default
	// "orders", 6).
	Topic      string
	Partitions int32
	// Gateways is how many gateways to start (default 2).
	Gateways int
	// Timing overrides DefaultTiming when not zero.
	Timing Timing
	// Groups are traced (QoS log level debug, so every gateway writes a
	// trace line per request) and observed (partition epochs, owners and
	// committed offsets read every ObserveEvery).
	Groups []string
	// CoordinatorProcess runs `capgate coordinator` as a process (kill -9
	// and restart on the same data directory); GatewayProcesses runs
	// `capgate gateway` processes. Both need Binaries.
	CoordinatorProcess bool
	GatewayProcesses   bool
	// Binaries are needed by process parts and consumer processes.
	Binaries Binaries
	// ObserveEvery is the admin API polling period (default 100ms).
	ObserveEvery time.Duration
}

// Cluster is one capgate deployment on loopback: an embedded Kafka
// (kfake), a coordinator, a SyncTap in front of its sync channel, and
// gateways each behind a Proxy — plus the Log every source feeds, and an
// observer reading the coordinator's admin API. Stopped by t.Cleanup.
// Methods are safe for concurrent use.
type Cluster struct {
	Log         *Log
	Kafka       *broker.Embedded
	Broker      *broker.Client // the test's own Kafka client (ground truth, produce)
	Coordinator *Coordinator
	Tap         *SyncTap
	AdminToken  string

	opts      Options
	logger    *zap.Logger
	http      *http.Client
	syncToken string
	adminHash string
	syncHash  string
	observer  *observer

	mu       sync.Mutex
	gateways []*Gateway
}

// Logger is the parts' logger: zap.NewNop unless CAPGATE_E2E_LOG names a
// level (debug, info, warn), then the test's log.
func Logger(t testing.TB) *zap.Logger {
	level := os.Getenv("CAPGATE_E2E_LOG")
	if level == "" {
		return zap.NewNop()
	}
	var l zapcore.Level
	if err := l.Set(level); err != nil {
		t.Fatalf("CAPGATE_E2E_LOG: %v", err)
	}
	return zaptest.NewLogger(t, zaptest.Level(l))
}

// Start builds the cluster, turns tracing on for opts.Groups and waits
// until every gateway acknowledged it.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	opts = withDefaults(opts)
	if err := opts.Timing.Validate(); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Log: NewLog(), opts: opts, logger: Logger(t), http: &http.Client{Timeout: 30 * time.Second}}
	var err error
	if c.AdminToken, c.adminHash, err = coordinator.GenerateSecret(); err != nil {
		t.Fatal(err)
	}
	if c.syncToken, c.syncHash, err = coordinator.GenerateSecret(); err != nil {
		t.Fatal(err)
	}
	c.startKafka(t)
	c.startCoordinator(t)
	if c.Tap, err = StartSyncTap(c.Log, c.Coordinator.URL); err != nil {
		t.Fatal(err)
	}
	cleanup(t, "sync tap", c.Tap.Close)
	for range opts.Gateways {
		c.AddGateway(t)
	}
	c.observer = startObserver(c, opts.ObserveEvery)
	cleanup(t, "observer", c.observer.stop)
	for _, g := range opts.Groups {
		c.Trace(t, g)
	}
	return c
}

func withDefaults(opts Options) Options {
	if opts.Topic == "" {
		opts.Topic = "orders"
	}
	if opts.Partitions == 0 {
		opts.Partitions = 6
	}
	if opts.Gateways == 0 {
		opts.Gateways = 2
	}
	if opts.Timing == (Timing{}) {
		opts.Timing = DefaultTiming()
	}
	if opts.ObserveEvery == 0 {
		opts.ObserveEvery = 100 * time.Millisecond
	}
	return opts
}

func (c *Cluster) startKafka(t testing.TB) {
	t.Helper()
	kafka, err := broker.StartEmbedded(broker.EmbeddedConfig{Topics: map[string]int32{c.opts.Topic: c.opts.Partitions}})
	if err != nil {
		t.Fatalf("start kafka: %v", err)
	}
	cleanup(t, "kafka", kafka.Close)
	c.Kafka = kafka
	client, err := broker.New(c.brokerConfig(), c.logger.Named("test-broker"))
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	cleanup(t, "kafka client", client.Close)
	c.Broker = client
}

func (c *Cluster) brokerConfig() broker.Config {
	cfg := broker.DefaultConfig()
	cfg.Seeds = c.Kafka.Addrs()
	return cfg
}

// Topic is the cluster's topic; Partitions its partition count.
func (c *Cluster) Topic() string { return c.opts.Topic }

// Partitions is the topic's partition count.
func (c *Cluster) Partitions() int32 { return c.opts.Partitions }

// Timing is the cluster's timing.
func (c *Cluster) Timing() Timing { return c.opts.Timing }

// Params are the checkers' parameters for this cluster.
func (c *Cluster) Params() Params { return c.opts.Timing.Params() }

// Gateways lists the gateways, first first.
func (c *Cluster) Gateways() []*Gateway {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Gateway(nil), c.gateways...)
}

// GatewayURLs lists the gateways' base URLs, first first.
func (c *Cluster) GatewayURLs() []string {
	var urls []string
	for _, g := range c.Gateways() {
		urls = append(urls, g.URL)
	}
	return urls
}

// HTTP is the client for the test's own requests.
func (c *Cluster) HTTP() *http.Client { return c.http }

func (c *Cluster) get(u string) (int, error) {
	resp, err := c.http.Get(u)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// Admin sends an admin API request (in as JSON unless nil) and decodes a
// 2xx answer into out (unless nil).
func (c *Cluster) Admin(method, path string, in, out any) (int, []byte, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.Coordinator.URL+path, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.AdminToken)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("admin %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("admin %s %s: %w", method, path, err)
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, raw, fmt.Errorf("admin %s %s: decode %s: %w", method, path, raw, err)
		}
	}
	return resp.StatusCode, raw, nil
}

// MustAdmin is Admin failing t unless the answer is 2xx.
func (c *Cluster) MustAdmin(t testing.TB, method, path string, in, out any) {
	t.Helper()
	status, raw, err := c.Admin(method, path, in, out)
	if err != nil || status/100 != 2 {
		t.Fatalf("admin %s %s: %d %s %v", method, path, status, raw, err)
	}
}

// ClientCredential mints a client credential for group through the
// admin API.
func (c *Cluster) ClientCredential(t testing.TB, group string) string {
	t.Helper()
	var resp coordinator.ClientResponse
	c.MustAdmin(t, http.MethodPost, "/v1/admin/clients",
		coordinator.ClientRequest{Name: "harness-" + group, Groups: []string{group}, Topics: []string{c.opts.Topic}, TTLMs: 3600_000}, &resp)
	return resp.Credential
}

// Describe returns GET /v1/admin/groups/{group}.
func (c *Cluster) Describe(group string) (coordinator.GroupDescription, error) {
	var d coordinator.GroupDescription
	status, raw, err := c.Admin(http.MethodGet, "/v1/admin/groups/"+url.PathEscape(group), nil, &d)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("describe %s: %d %s", group, status, raw)
	}
	return d, err
}

// Trace turns the gateways' per-request trace lines on for group (QoS
// log level debug, for an hour) and waits until every gateway
// acknowledged it.
func (c *Cluster) Trace(t testing.TB, group string) {
	t.Helper()
	c.MustAdmin(t, http.MethodPut, "/v1/admin/qos",
		coordinator.QoSRequest{Selector: api.QoSSelector{Group: group}, LogLevel: "debug", TTLMs: 3600_000}, nil)
	c.observer.addGroup(group)
	c.WaitSynced(t)
}

// WaitSynced waits until every gateway acknowledged the coordinator's
// current sync seq.
func (c *Cluster) WaitSynced(t testing.TB) {
	t.Helper()
	var first coordinator.GatewaysResponse
	c.MustAdmin(t, http.MethodGet, "/v1/admin/gateways", nil, &first)
	Eventually(t, 20*time.Second, "gateways acknowledged seq "+fmt.Sprint(first.Seq), func() (bool, string) {
		var now coordinator.GatewaysResponse
		if status, raw, err := c.Admin(http.MethodGet, "/v1/admin/gateways", nil, &now); err != nil || status != http.StatusOK {
			return false, fmt.Sprintf("%d %s %v", status, raw, err)
		}
		acked := map[string]uint64{}
		for _, g := range now.Gateways {
			acked[g.ID] = g.Acked
		}
		for _, g := range c.Gateways() {
			if acked[g.ID] < first.Seq {
				return false, fmt.Sprintf("%s acked %d", g.ID, acked[g.ID])
			}
		}
		return true, ""
	})
}

// Check runs every checker over the log as it is now and fails t with
// each violation.
func (c *Cluster) Check(t testing.TB) Snapshot {
	t.Helper()
	s := c.Log.Snapshot()
	RequireInvariants(t, s, c.Params())
	return s
}
