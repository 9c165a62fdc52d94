package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/gateway"
)

// Timing is the cluster's clock settings: short, but consistent with every
// Validate rule (gateway sync_timeout < gateway_timeout − max_clock_skew,
// heartbeat_wait < capability_lease/2, sync_wait < sync_timeout).
type Timing struct {
	// CapabilityLease is the lifetime of granted capabilities (≥ 2s).
	CapabilityLease time.Duration
	// HeartbeatWait caps a held heartbeat (coordinator side).
	HeartbeatWait time.Duration
	// SessionTimeoutMin is the shortest session a member may ask for.
	SessionTimeoutMin time.Duration
	// HandoffTimeout bounds how long a revoke waits for the release.
	HandoffTimeout time.Duration
	// GatewayTimeout: a silent gateway is safe after this long.
	GatewayTimeout time.Duration
	// MaxClockSkew is the coordinator's clock-skew allowance.
	MaxClockSkew time.Duration
	// SyncWait is how long a sync poll is held (gateway and coordinator).
	SyncWait time.Duration
	// SyncTimeout: a gateway without a good sync this long refuses (503).
	SyncTimeout time.Duration
}

// DefaultTiming is fast enough for a test suite and slow enough for a
// loaded 2-core machine.
func DefaultTiming() Timing {
	return Timing{
		CapabilityLease:   4 * time.Second,
		HeartbeatWait:     time.Second,
		SessionTimeoutMin: time.Second,
		HandoffTimeout:    5 * time.Second,
		GatewayTimeout:    4 * time.Second,
		MaxClockSkew:      500 * time.Millisecond,
		SyncWait:          time.Second,
		SyncTimeout:       3 * time.Second,
	}
}

// ClusterOptions describe the deployment StartCluster builds.
type ClusterOptions struct {
	// Topic and Partitions name the one topic created in the broker.
	Topic      string
	Partitions int32
	// Gateways is how many gateways to start (default 1).
	Gateways int
	// Timing overrides DefaultTiming when not zero.
	Timing Timing
	// KafkaBrokers is how many kfake brokers run (default 1).
	KafkaBrokers int
	// GatewayConfig, when set, adjusts every gateway's configuration
	// before it starts (the Kafka listener's tests turn it on).
	GatewayConfig func(*gateway.Config)
}

// Cluster is one capgate deployment inside the test process: a kfake
// broker, a coordinator on a loopback port with its store in t.TempDir(),
// and gateways on loopback ports, all real, talking real HTTP. Stopped by
// t.Cleanup. Methods are safe for concurrent use.
type Cluster struct {
	t          testing.TB
	Topic      string
	Partitions int32
	Timing     Timing

	Kafka *broker.Embedded
	// Broker is a Kafka client for the test itself (ground truth, direct
	// produce).
	Broker *broker.Client

	Coordinator    *coordinator.Coordinator
	CoordinatorURL string
	AdminToken     string

	syncToken     string
	log           *zap.Logger
	http          *http.Client
	kafkaBrokers  int
	gatewayConfig func(*gateway.Config)

	mu       sync.Mutex
	gateways []*Gateway
}

// Gateway is one running gateway of the cluster.
type Gateway struct {
	ID  string
	URL string
	*gateway.Gateway
	closeOnce sync.Once
}

// Close stops the gateway (idempotent); fetches in flight answer 503.
func (g *Gateway) Close() {
	g.closeOnce.Do(func() { _ = g.Gateway.Close() })
}

// Logger is the logger of every part: zap.NewNop unless CAPGATE_E2E_LOG
// names a level (debug, info, warn), then the test's log.
func Logger(t testing.TB) *zap.Logger { return harness.Logger(t) }

// StartCluster starts broker, coordinator and gateways and waits until
// every gateway is ready (first sync applied).
func StartCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	if opts.Topic == "" {
		opts.Topic = "orders"
	}
	if opts.Partitions == 0 {
		opts.Partitions = 12
	}
	if opts.Timing == (Timing{}) {
		opts.Timing = DefaultTiming()
	}
	// Neither process can check this rule of DESIGN §4 alone.
	if tm := opts.Timing; tm.SyncTimeout >= tm.GatewayTimeout-tm.MaxClockSkew {
		t.Fatalf("timing: gateway sync_timeout %s must be < gateway_timeout %s − max_clock_skew %s",
			tm.SyncTimeout, tm.GatewayTimeout, tm.MaxClockSkew)
	}
	c := &Cluster{
		t: t, Topic: opts.Topic, Partitions: opts.Partitions, Timing: opts.Timing,
		log:  Logger(t),
		http: &http.Client{Timeout: 30 * time.Second},

		kafkaBrokers: opts.KafkaBrokers, gatewayConfig: opts.GatewayConfig,
	}
	c.startBroker(t)
	c.startCoordinator(t)
	for range max(opts.Gateways, 1) {
		c.AddGateway(t)
	}
	return c
}

func (c *Cluster) startBroker(t testing.TB) {
	kafka, err := broker.StartEmbedded(broker.EmbeddedConfig{Brokers: c.kafkaBrokers, Topics: map[string]int32{c.Topic: c.Partitions}})
	if err != nil {
		t.Fatalf("start kafka: %v", err)
	}
	t.Cleanup(kafka.Close)
	c.Kafka = kafka
	client, err := broker.New(c.brokerConfig(), c.log.Named("test-broker"))
	if err != nil {
		t.Fatalf("broker client: %v", err)
	}
	t.Cleanup(client.Close)
	c.Broker = client
}

func (c *Cluster) brokerConfig() broker.Config {
	cfg := broker.DefaultConfig()
	cfg.Seeds = c.Kafka.Addrs()
	return cfg
}

func (c *Cluster) startCoordinator(t testing.TB) {
	admin, adminHash, err := coordinator.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	syncToken, syncHash, err := coordinator.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	c.AdminToken, c.syncToken = admin, syncToken
	cfg := coordinator.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Broker = c.brokerConfig()
	cfg.AdminTokenHashes = []string{adminHash}
	cfg.SyncTokenHashes = []string{syncHash}
	cfg.CapabilityLease = c.Timing.CapabilityLease
	cfg.ShutdownTimeout = 5 * time.Second
	g := &cfg.Groups
	g.HeartbeatWait = c.Timing.HeartbeatWait
	g.SessionTimeoutMin = c.Timing.SessionTimeoutMin
	g.HandoffTimeout = c.Timing.HandoffTimeout
	g.GatewayTimeout = c.Timing.GatewayTimeout
	g.MaxClockSkew = c.Timing.MaxClockSkew
	g.SyncWaitMax = c.Timing.SyncWait
	coord, stop := harness.RunCoordinator(t, cfg, c.log.Named("coordinator"), c.Broker)
	t.Cleanup(func() {
		c.http.CloseIdleConnections()
		var err error
		slow(t, "close coordinator", func() { err = stop() })
		if err != nil {
			t.Errorf("coordinator run: %v", err)
		}
	})
	c.Coordinator = coord
	c.CoordinatorURL = "http://" + coord.Addr().String()
	Eventually(t, 10*time.Second, "coordinator healthy", func() (bool, string) {
		status, err := c.get(c.CoordinatorURL + "/healthz")
		return err == nil && status == http.StatusOK, fmt.Sprintf("status %d err %v", status, err)
	})
}

// AddGateway starts one more gateway and waits until it is ready.
func (c *Cluster) AddGateway(t testing.TB) *Gateway {
	t.Helper()
	c.mu.Lock()
	id := "gateway-" + strconv.Itoa(len(c.gateways)+1)
	c.mu.Unlock()
	cfg := gateway.DefaultConfig()
	cfg.ID = id
	cfg.Listen = "127.0.0.1:0"
	cfg.CoordinatorURL = c.CoordinatorURL
	cfg.SyncToken = gateway.Secret(c.syncToken)
	cfg.SyncWait = c.Timing.SyncWait
	cfg.SyncTimeout = c.Timing.SyncTimeout
	cfg.Issuer, cfg.Audience = coordinator.DefaultConfig().ID, coordinator.DefaultConfig().Cluster
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.Broker = c.brokerConfig()
	if c.gatewayConfig != nil {
		c.gatewayConfig(&cfg)
	}
	g, err := gateway.New(cfg, c.log.Named(id))
	if err != nil {
		t.Fatalf("gateway %s: %v", id, err)
	}
	if err := g.Start(); err != nil {
		t.Fatalf("gateway %s: %v", id, err)
	}
	gw := &Gateway{ID: id, URL: "http://" + g.Addr(), Gateway: g}
	t.Cleanup(func() {
		c.http.CloseIdleConnections()
		slow(t, "close "+id, gw.Close)
	})
	Eventually(t, 10*time.Second, id+" ready", func() (bool, string) {
		status, err := c.get(gw.URL + "/readyz")
		return err == nil && status == http.StatusOK, fmt.Sprintf("status %d err %v", status, err)
	})
	c.mu.Lock()
	c.gateways = append(c.gateways, gw)
	c.mu.Unlock()
	return gw
}

// Gateways lists the gateways started so far, first first.
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

func (c *Cluster) get(url string) (int, error) {
	resp, err := c.http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// ClientCredential mints a client credential for group (any topic) with
// (*coordinator.Coordinator).MintClientCredential.
func (c *Cluster) ClientCredential(t testing.TB, group string) string {
	t.Helper()
	cred, err := c.Coordinator.MintClientCredential("e2e-"+group, []string{group}, []string{c.Topic}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// Admin sends an admin API request (in encoded as JSON unless nil) and
// decodes a 2xx answer into out (unless nil). It returns the status and
// the raw body; transport errors fail the test.
func (c *Cluster) Admin(t testing.TB, method, path string, in, out any) (int, []byte) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.CoordinatorURL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.AdminToken)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatalf("admin %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("admin %s %s: read: %v", method, path, err)
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("admin %s %s: decode %s: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, raw
}

// Describe returns GET /v1/admin/groups/{group}.
func (c *Cluster) Describe(t testing.TB, group string) coordinator.GroupDescription {
	t.Helper()
	var d coordinator.GroupDescription
	if status, raw := c.Admin(t, http.MethodGet, "/v1/admin/groups/"+group, nil, &d); status != http.StatusOK {
		t.Fatalf("describe %s: %d %s", group, status, raw)
	}
	return d
}

// Settled reports whether the group has exactly members live members,
// every partition owned (none revoking or unowned), and each member owns
// floor or ceil of partitions/members; otherwise it says why not.
func (c *Cluster) Settled(t testing.TB, group string, members int) (bool, string) {
	d := c.Describe(t, group)
	if len(d.Members) != members {
		return false, fmt.Sprintf("%d members, want %d", len(d.Members), members)
	}
	counts := map[string]int{}
	for _, p := range d.Partitions {
		if p.State != "owned" {
			return false, fmt.Sprintf("partition %d is %s", p.Partition, p.State)
		}
		counts[p.Owner]++
	}
	floor := int(c.Partitions) / members
	for _, m := range d.Members {
		if n := counts[m.ID]; n < floor || n > floor+1 {
			return false, fmt.Sprintf("member %s owns %d", m.ID, n)
		}
	}
	return true, ""
}

// slow runs fn and logs it when it took over a second (shutdown paths
// are bounded by timeouts a test should not be waiting for).
func slow(t testing.TB, what string, fn func()) {
	start := time.Now()
	fn()
	if d := time.Since(start); d > time.Second {
		t.Logf("%s: %s took %v", t.Name(), what, d.Round(time.Millisecond))
	}
}

// HTTP is the cluster's client for the test's own requests (admin API,
// raw fetches); its idle connections are closed before the servers.
func (c *Cluster) HTTP() *http.Client { return c.http }
