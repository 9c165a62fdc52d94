package harness

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/gateway"
	"github.com/capgate/capgate/internal/stack"
)

// Options describe the deployment Start builds.
type Options struct {
	// Topic and Partitions name the one topic created in Kafka (default
	// "orders", 6).
	Topic      string
	Partitions int32
	// Brokers is the number of kfake brokers (default 1).
	Brokers int
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
	// Coordinators > 1 runs coordinator replicas on the Kafka log
	// (stack.Options.Coordinators): a SyncTap in front of each, every
	// gateway's proxies lead to all of them, consumers get every URL.
	Coordinators int
	// KafkaOptions are extra kfake options (a stack.KafkaCut's listener).
	KafkaOptions []kfake.Opt
	// CoordinatorConfig edits coordinator i's configuration last (its
	// Kafka client id, so that a KafkaCut can tell it apart).
	CoordinatorConfig func(i int, cfg *coordinator.Config)
	// GatewayConfig edits gateway i's configuration last (a Kafka
	// listener).
	GatewayConfig func(i int, cfg *gateway.Config)
}

// Cluster is one capgate deployment on loopback, built by stack.Start:
// an embedded Kafka (kfake), a coordinator, a SyncTap in front of its
// sync channel, and gateways each behind a Proxy — plus the Log every
// source feeds, and an observer reading the coordinator's admin API.
// Stopped by t.Cleanup. Methods are safe for concurrent use.
type Cluster struct {
	*stack.Stack
	Log         *Log
	Coordinator *Coordinator // the first coordinator
	Tap         *SyncTap     // the first coordinator's
	// Replicas are every coordinator (first first) and Taps their
	// SyncTaps; one each without replicas.
	Replicas []*Coordinator
	Taps     []*SyncTap

	opts     Options
	logger   *zap.Logger
	observer *observer

	mu       sync.Mutex
	gateways []*Gateway
	roles    []RoleChange
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
	c := &Cluster{Log: NewLog(), opts: opts, logger: Logger(t)}
	s, err := stack.Start(context.Background(), stack.Options{
		Dir: t.TempDir(), Topics: map[string]int32{opts.Topic: opts.Partitions}, Brokers: opts.Brokers,
		CoordinatorProcess: opts.CoordinatorProcess, GatewayProcesses: opts.GatewayProcesses, Binary: opts.Binaries.Capgate,
		Timing: opts.Timing, Logger: c.partLogger, OnLine: c.partLine,
		Coordinators: opts.Coordinators, KafkaOptions: opts.KafkaOptions, Coordinator: opts.CoordinatorConfig,
		Gateway: opts.GatewayConfig,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Last registered, first run: the stack goes after everything that
	// uses it (members, producer, tap, proxies).
	cleanup(t, "stack", func() {
		if err := s.Close(); err != nil {
			t.Errorf("stack: %v", err)
		}
	})
	c.Stack = s
	for _, co := range s.Coordinators() {
		tap, err := StartSyncTap(c.Log, co.URL)
		if err != nil {
			t.Fatal(err)
		}
		cleanup(t, "sync tap", tap.Close)
		c.Replicas = append(c.Replicas, &Coordinator{Coordinator: co, c: c})
		c.Taps = append(c.Taps, tap)
	}
	c.Coordinator, c.Tap = c.Replicas[0], c.Taps[0]
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

// partLogger is an in-process part's logger; a gateway's also feeds its
// trace lines to the log.
func (c *Cluster) partLogger(part string) *zap.Logger {
	l := c.logger.Named(part)
	if len(part) > len("gateway-") && part[:len("gateway-")] == "gateway-" {
		return zap.New(zapcore.NewTee(l.Core(), TraceCore(part, c.Log)))
	}
	return l
}

// partLine takes a part process's JSON log line: a gateway's trace lines
// go to the log.
func (c *Cluster) partLine(part string, line []byte) {
	if f, ok := ParseTraceLine(part, line); ok {
		c.Log.AddFetch(f)
		return
	}
	if r, ok := parseRoleLine(part, line); ok {
		c.mu.Lock()
		c.roles = append(c.roles, r)
		c.mu.Unlock()
	}
}

// Topic is the cluster's topic.
func (c *Cluster) Topic() string { return c.opts.Topic }

// Partitions is the topic's partition count.
func (c *Cluster) Partitions() int32 { return c.opts.Partitions }

// Params are the checkers' parameters for this cluster.
func (c *Cluster) Params() Params { return ParamsOf(c.opts.Timing) }

// Gateways lists the gateways, first first.
func (c *Cluster) Gateways() []*Gateway {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Gateway(nil), c.gateways...)
}

// Admin sends an admin API request (in as JSON unless nil) and decodes a
// 2xx answer into out (unless nil).
func (c *Cluster) Admin(method, path string, in, out any) (int, []byte, error) {
	return c.Stack.Admin(context.Background(), method, path, in, out)
}

// MustAdmin is Admin failing t unless the answer is 2xx.
func (c *Cluster) MustAdmin(t testing.TB, method, path string, in, out any) {
	t.Helper()
	if err := c.Stack.MustAdmin(context.Background(), method, path, in, out); err != nil {
		t.Fatal(err)
	}
}

// ClientCredential mints a client credential for group and the
// cluster's topic through the admin API.
func (c *Cluster) ClientCredential(t testing.TB, group string) string {
	t.Helper()
	cred, err := c.Stack.ClientCredential(context.Background(), "harness-"+group, []string{group}, []string{c.opts.Topic}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// Describe returns GET /v1/admin/groups/{group}.
func (c *Cluster) Describe(group string) (coordinator.GroupDescription, error) {
	return c.Stack.Describe(context.Background(), group)
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
	seq, err := c.SyncSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	Eventually(t, 20*time.Second, "gateways acknowledged seq "+fmt.Sprint(seq), func() (bool, string) {
		ok, why, err := c.Acked(context.Background(), seq)
		if err != nil {
			return false, err.Error()
		}
		return ok, why
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
