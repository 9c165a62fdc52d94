package kafkaclients

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/gateway"
	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/internal/stack"
)

// Options describe the deployment Start builds.
type Options struct {
	Topic      string // default "orders"
	Partitions int32  // default 12
	Gateways   int    // default 1
	// KafkaBrokers is how many kfake brokers run (default 1).
	KafkaBrokers int
	// HeartbeatInterval is handed to KIP-848 members (default 50ms).
	HeartbeatInterval time.Duration
	// Peers lists every gateway as a broker to capability connections.
	Peers bool
	// MemberSessionTimeout is KIP-848 members' session (default 10s).
	MemberSessionTimeout time.Duration
	Timing               sdk.Timing
	// OIDC, when it names issuers, is the coordinator's oidc section and
	// every gateway's kafka_oidc.
	OIDC identity.Config
	// Gateway, when set, edits every gateway's configuration last.
	Gateway func(*gateway.Config)
	// Observe, when set, also receives every part's log (sdk.ClusterOptions).
	Observe zapcore.Core
}

// Stack is a capgate deployment whose gateways run the Kafka listener.
type Stack struct {
	*sdk.Cluster
}

// Start starts kfake, a coordinator and gateways with kafka_listen on a
// free loopback port each.
func Start(t testing.TB, opts Options) *Stack {
	t.Helper()
	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval = 50 * time.Millisecond
	}
	gateways := max(opts.Gateways, 1)
	var peers *stack.PortRanges
	if opts.Peers {
		peers = reservePeers(t, gateways)
	}
	n := 0
	c := sdk.StartCluster(t, sdk.ClusterOptions{
		Topic: opts.Topic, Partitions: opts.Partitions, Gateways: gateways, Timing: opts.Timing, KafkaBrokers: opts.KafkaBrokers,
		Observe: opts.Observe,
		CoordinatorConfig: func(cfg *coordinator.Config) {
			if len(opts.OIDC.Issuers) > 0 {
				cfg.OIDC = opts.OIDC
			}
		},
		GatewayConfig: func(cfg *gateway.Config) {
			if len(opts.OIDC.Issuers) > 0 {
				cfg.KafkaOIDC = opts.OIDC
			}
			cfg.KafkaListen = "127.0.0.1:0"
			if peers != nil {
				cfg.KafkaListen, cfg.KafkaAdvertised, cfg.KafkaPeers = peers.Addrs[n], peers.Addrs[n], peers.Addrs
				peers.Release(n) // the gateway binds them now: held until this moment
			}
			n++
			cfg.KafkaHeartbeatInterval = opts.HeartbeatInterval
			if opts.MemberSessionTimeout > 0 {
				cfg.KafkaMemberSessionTimeout = opts.MemberSessionTimeout
			}
			cfg.KafkaAuthTimeout = 3 * time.Second
			cfg.ReadTimeout = 2 * time.Second
			if opts.Gateway != nil {
				opts.Gateway(cfg)
			}
		},
	})
	return &Stack{Cluster: c}
}

// KafkaAddrs are the gateways' Kafka listener addresses.
func (s *Stack) KafkaAddrs() []string {
	var out []string
	for _, g := range s.Gateways() {
		out = append(out, g.InProcess().KafkaAddr())
	}
	return out
}

// Grant mints a shared capability (admin API) for topic/partition.
func (s *Stack) Grant(t testing.TB, topic string, partition int32, ops []string, ttl time.Duration) api.CapabilityResponse {
	t.Helper()
	var out api.CapabilityResponse
	req := coordinator.SharedGrantRequest{Topic: topic, Partition: partition, Ops: ops, TTLMs: ttl.Milliseconds(), Holder: "kafka-test"}
	if status, raw := s.Admin(t, http.MethodPost, "/v1/admin/capabilities", req, &out); status != http.StatusOK {
		t.Fatalf("grant: %d %s", status, raw)
	}
	return out
}

// Deny revokes a capability (or credential) by jti on every gateway.
func (s *Stack) Deny(t testing.TB, jti string) {
	t.Helper()
	if status, raw := s.Admin(t, http.MethodPost, "/v1/admin/capabilities/"+jti+"/revoke", json.RawMessage(`{}`), nil); status != http.StatusOK {
		t.Fatalf("deny: %d %s", status, raw)
	}
}

// reservePeers holds n ranges of loopback ports for peered gateways'
// Kafka listeners, each the first of kafka_fetch_lanes ports in a row (a
// listener binds one port per lane from there), until each gateway is
// configured. Every gateway must be told all of them before the first
// starts, so port 0 cannot serve; found free and closed at once, a port
// could be taken by a test beside this one before its gateway binds it.
func reservePeers(t testing.TB, n int) *stack.PortRanges {
	t.Helper()
	r, err := stack.ReservePortRanges("", n, gateway.DefaultConfig().KafkaFetchLanes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}
