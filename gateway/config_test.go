package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/config"
)

func TestDefaultConfigValidates(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	if c.Listen != "127.0.0.1:8080" || c.CoordinatorURL != "http://127.0.0.1:7070" || c.SyncWait != 3*time.Second ||
		c.SyncTimeout != 10*time.Second || c.TokenCacheEntries != 100_000 || c.MaxWait != 30*time.Second {
		t.Fatalf("defaults %+v", c)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	cases := []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.ID = "a/b" }, `gateway.id: must be 1-255 printable characters without '/', not . or .., got "a/b"`},
		{func(c *Config) { c.Listen = "8080" }, `gateway.listen: must be host:port, got "8080"`},
		{func(c *Config) { c.CoordinatorURL = "ftp://x" }, `gateway.coordinator_url: coordinator URL must be an http(s) URL with a host, got "ftp://x"`},
		{func(c *Config) { c.CoordinatorURL = "http://a:7070, ftp://x" }, `gateway.coordinator_url: coordinator URL must be an http(s) URL with a host, got "ftp://x"`},
		{func(c *Config) { c.CoordinatorURL = "http://a:7070,http://a:7070/" }, `gateway.coordinator_url: coordinator URL "http://a:7070/" listed twice`},
		{func(c *Config) { c.SyncTimeout = 0 }, "gateway.sync_timeout: must be > 0, got 0s"},
		{func(c *Config) { c.SyncWait = 10 * time.Second }, "gateway.sync_wait: 2 × sync_wait + 500ms must be <= sync_timeout (10s), got sync_wait 10s"},
		{func(c *Config) { c.SyncWait = 5 * time.Second }, "gateway.sync_wait: 2 × sync_wait + 500ms must be <= sync_timeout (10s), got sync_wait 5s"},
		{func(c *Config) { c.MaxWait = 0 }, "gateway.max_wait: must be > 0, got 0s"},
		{func(c *Config) { c.MaxHeaderBytes = 1024 }, "gateway.max_header_bytes: must be >= 5120 to fit a capability, got 1024"},
		{func(c *Config) { c.MaxFetchBytes = 1 << 30 }, "gateway.max_fetch_bytes: must be in [1, broker.max_fetch_bytes (8388608)], got 1073741824"},
		{func(c *Config) { c.DefaultFetchBytes = 0 }, "gateway.default_fetch_bytes: must be in [1, max_fetch_bytes (8388608)], got 0"},
		{func(c *Config) { c.MonitorLabelsMax = 0 }, "gateway.monitor_labels_max: must be > 0, got 0"},
		{func(c *Config) { c.MaxConnections = 0 }, "gateway.max_connections: must be > 0, got 0"},
		{func(c *Config) { c.MaxAnswerBytesHeldPerHolder = 1 << 20 }, "gateway.max_answer_bytes_held_per_holder: must be >= max_fetch_bytes (8388608), got 1048576"},
		{func(c *Config) { c.MaxAnswerBytesHeld = 1 << 20 }, "gateway.max_answer_bytes_held: must be >= max_answer_bytes_held_per_holder (67108864), got 1048576"},
		{func(c *Config) { c.Broker.Seeds = nil }, "broker.seeds"},
		{func(c *Config) { c.KafkaListen, c.KafkaFetchLanes = "127.0.0.1:9092", 0 }, "gateway.kafka_fetch_lanes: must be in [1, 64], got 0"},
		{func(c *Config) { c.KafkaListen, c.KafkaFetchLanes = "127.0.0.1:9092", 65 }, "gateway.kafka_fetch_lanes: must be in [1, 64], got 65"},
		{func(c *Config) { c.KafkaListen, c.KafkaMaxRequestPartitions = "127.0.0.1:9092", 0 }, "gateway.kafka_max_request_partitions: must be > 0, got 0"},
		{func(c *Config) { c.KafkaListen, c.KafkaCoordinatorConnectionsMax = "127.0.0.1:9092", 0 }, "gateway.kafka_coordinator_connections_max: must be > 0, got 0"},
		{func(c *Config) { c.KafkaListen = "127.0.0.1:65534" }, "gateway.kafka_fetch_lanes: lanes listen at kafka_listen's port + 0…3, past 65535 from 65534"},
		{func(c *Config) { c.KafkaListen, c.KafkaAdvertised = "127.0.0.1:9093", "gw.example:65533" },
			`gateway.kafka_fetch_lanes: lanes are advertised at kafka_advertised's port + 0…3, past 65535 from "gw.example:65533"`},
		{func(c *Config) { c.KafkaListen, c.KafkaAdvertised = "0.0.0.0:0", "gw.example:9093" }, "gateway.kafka_listen: must name a port (not 0) with kafka_advertised set and kafka_fetch_lanes 4"},
		{func(c *Config) { c.KafkaListen = "127.0.0.1:kafka" }, `gateway.kafka_listen: port must be a number in [0, 65535], got "127.0.0.1:kafka"`},
		{func(c *Config) {
			c.KafkaListen, c.KafkaAdvertised, c.KafkaPeers = "0.0.0.0:9093", "gw.example:9093", []string{"gw.example:9093", "gw.example:9095"}
		}, "gateway.kafka_peers: gw.example:9093 and gw.example:9095: every gateway's kafka_fetch_lanes ports (its port + 0…3) must be its own"},
	}
	for _, tc := range cases {
		c := DefaultConfig()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err %v, want %q", err, tc.want)
		}
	}
}

func TestConfigLoadsFromYAMLAndEnv(t *testing.T) {
	c := DefaultConfig()
	if err := config.Decode([]byte("id: gw-9\nsync_token: s3cret\nsync_wait: 2s\nbroker:\n  seeds: [\"k:9092\"]\n"), &c); err != nil {
		t.Fatal(err)
	}
	if err := config.ApplyEnv([]string{"CAPGATE_MAX_WAIT=5s"}, &c); err != nil {
		t.Fatal(err)
	}
	if c.ID != "gw-9" || c.SyncToken != "s3cret" || c.SyncWait != 2*time.Second || c.MaxWait != 5*time.Second || c.Broker.Seeds[0] != "k:9092" {
		t.Fatalf("loaded %+v", c)
	}
}

func TestSyncTokenNeverPrinted(t *testing.T) {
	c := DefaultConfig()
	c.SyncToken = "s3cret"
	j, _ := json.Marshal(c)
	y, _ := yaml.Marshal(c)
	core, logs := observer.New(zapcore.DebugLevel)
	zap.New(core).Info("cfg", zap.Object("config", c), zap.Any("any", c))
	for _, out := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), string(j), string(y), fmt.Sprint(logs.All()[0].ContextMap())} {
		if strings.Contains(out, "s3cret") {
			t.Fatalf("sync token printed: %s", out)
		}
	}
}

// TestGatewayWithoutSyncCredentialRefusesToStart: a gateway configured
// with neither a sync token nor a client certificate for the coordinator
// could never sync and would answer every fetch 503 not_ready for ever;
// it refuses to start instead, naming the setting.
func TestGatewayWithoutSyncCredentialRefusesToStart(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "gateway.sync_token: required") {
		t.Fatalf("New without a sync token: %v", err)
	}
	cfg.SyncToken = "s3cret"
	g, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("New with a sync token: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
}
