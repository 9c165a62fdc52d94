package sdk

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/gateway"
	"github.com/capgate/capgate/internal/stack"
)

// Timing is the cluster's clock settings (stack.Timing).
type Timing = stack.Timing

// DefaultTiming is fast enough for a test suite and slow enough for a
// loaded 2-core machine; members get 10s sessions.
func DefaultTiming() Timing {
	return Timing{
		CapabilityLease: 4 * time.Second,
		HeartbeatWait:   time.Second,
		SessionTimeout:  10 * time.Second,
		HandoffTimeout:  5 * time.Second,
		GatewayTimeout:  4 * time.Second,
		MaxClockSkew:    500 * time.Millisecond,
		SyncWait:        time.Second,
		SyncTimeout:     3 * time.Second,
		Leeway:          2 * time.Second,
	}
}

// ClusterOptions describe the deployment StartCluster builds.
type ClusterOptions struct {
	// Topic and Partitions name the one topic created in the broker.
	Topic      string
	Partitions int32
	// OtherTopics are more topics to create (name → partitions).
	OtherTopics map[string]int32
	// Gateways is how many gateways to start (default 1).
	Gateways int
	// Coordinators > 1 runs coordinator replicas, the state in the
	// broker's log (stack.Options.Coordinators); CoordinatorURL is then
	// the leader's when the cluster started.
	Coordinators int
	// Timing overrides DefaultTiming when not zero.
	Timing Timing
	// KafkaBrokers is how many kfake brokers run (default 1).
	KafkaBrokers int
	// GatewayConfig, when set, adjusts every gateway's configuration
	// before it starts (the Kafka listener's tests turn it on).
	GatewayConfig func(*gateway.Config)
	// CoordinatorConfig, when set, adjusts the coordinator's configuration
	// (the Kafka listener's IdP tests configure oidc issuers).
	CoordinatorConfig func(*coordinator.Config)
	// Observe, when set, also receives every part's log (named as the
	// part: "gateway-0", …), for tests that assert a log line.
	Observe zapcore.Core
}

// Cluster is one capgate deployment inside the test process, built by
// stack.Start: a kfake broker, a coordinator on a loopback port with its
// store in t.TempDir(), and gateways on loopback ports, all real, talking
// real HTTP. Stopped by t.Cleanup. Methods are safe for concurrent use.
type Cluster struct {
	*stack.Stack
	Topic      string
	Partitions int32
	// CoordinatorURL is the coordinator's base URL (the stack's
	// CoordinatorURL(); it never moves in this suite).
	CoordinatorURL string

	log *zap.Logger
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
	c := &Cluster{Topic: opts.Topic, Partitions: opts.Partitions, log: Logger(t)}
	topics := map[string]int32{opts.Topic: opts.Partitions}
	maps.Copy(topics, opts.OtherTopics)
	sopts := stack.Options{
		Dir: t.TempDir(), Topics: topics, Brokers: opts.KafkaBrokers, Gateways: max(opts.Gateways, 1),
		Coordinators: opts.Coordinators,
		Timing:       opts.Timing, Logger: func(part string) *zap.Logger { return c.log.Named(part) },
	}
	if opts.Observe != nil {
		sopts.Logger = func(part string) *zap.Logger {
			return zap.New(zapcore.NewTee(c.log.Core(), opts.Observe)).Named(part)
		}
	}
	if opts.GatewayConfig != nil {
		sopts.Gateway = func(_ int, cfg *gateway.Config) { opts.GatewayConfig(cfg) }
	}
	if opts.CoordinatorConfig != nil {
		sopts.Coordinator = func(_ int, cfg *coordinator.Config) { opts.CoordinatorConfig(cfg) }
	}
	s, err := stack.Start(context.Background(), sopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var err error
		slow(t, "close the stack", func() { err = s.Close() })
		if err != nil {
			t.Errorf("stack: %v", err)
		}
	})
	c.Stack, c.CoordinatorURL = s, s.CoordinatorURL()
	return c
}

// ClientCredential mints a client credential for group and the cluster's
// topic through the admin API.
func (c *Cluster) ClientCredential(t testing.TB, group string) string {
	t.Helper()
	cred, err := c.Stack.ClientCredential(context.Background(), "e2e-"+group, []string{group}, []string{c.Topic}, time.Hour)
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
	status, raw, err := c.Stack.Admin(context.Background(), method, path, in, out)
	if err != nil {
		t.Fatalf("admin %s %s: %v", method, path, err)
	}
	return status, raw
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
