package broker

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
)

func TestDefaultConfigIsValid(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.MaxFetchBytes != 8<<20 || cfg.RequestTimeout != 10*time.Second || cfg.MetadataMaxAge != 30*time.Second ||
		cfg.ClientID != "capgate" || len(cfg.Seeds) != 1 || cfg.Seeds[0] != "127.0.0.1:9092" || cfg.ProduceCompression != "none" {
		t.Fatalf("defaults: %+v", cfg)
	}
}

func TestValidateNamesFieldAndValue(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Seeds = nil }, "broker.seeds"},
		{func(c *Config) { c.Seeds = []string{"nohost"} }, `broker.seeds: must be host:port, got "nohost"`},
		{func(c *Config) { c.Seeds = []string{"h:0"} }, `broker.seeds: must be host:port with a port in 1..65535, got "h:0"`},
		{func(c *Config) { c.ClientID = "" }, "broker.client_id"},
		{func(c *Config) { c.MaxFetchBytes = 0 }, "broker.max_fetch_bytes: must be > 0, got 0"},
		{func(c *Config) { c.MaxFetchBytes = 1 << 30 }, "broker.max_fetch_bytes: must be <= 268435456, got 1073741824"},
		{func(c *Config) { c.RequestTimeout = 0 }, "broker.request_timeout: must be > 0, got 0s"},
		{func(c *Config) { c.MetadataMaxAge = -time.Second }, "broker.metadata_max_age: must be > 0, got -1s"},
		{func(c *Config) { c.FetchConnectionsPerBroker = 0 }, "broker.fetch_connections_per_broker: must be > 0, got 0"},
		{func(c *Config) { c.MergeFetchesAfter = -1 }, "broker.merge_fetches_after: must be between 0 and fetch_connections_per_broker (32), got -1"},
		{func(c *Config) { c.MergeFetchesAfter = 33 }, "broker.merge_fetches_after: must be between 0 and fetch_connections_per_broker (32), got 33"},
		{func(c *Config) { c.MergeWaitMax = 0 }, "broker.merge_wait_max: must be > 0 and <= request_timeout (10s) while merge_fetches_after > 0, got 0s"},
		{func(c *Config) { c.ReadAheadBytes = -1 }, "broker.read_ahead_bytes: must be between 0 (off) and 4194304, got -1"},
		{func(c *Config) { c.ReadAheadBytes = 8 << 20 }, "broker.read_ahead_bytes: must be between 0 (off) and 4194304, got 8388608"},
		{func(c *Config) { c.ReadAheadMaxBytes = 1024 }, "broker.read_ahead_max_bytes: must be >= read_ahead_bytes (65536) while read-ahead is on, got 1024"},
		{func(c *Config) { c.MergeWaitMax = time.Minute }, "broker.merge_wait_max: must be > 0 and <= request_timeout (10s) while merge_fetches_after > 0, got 1m0s"},
		{func(c *Config) { c.ProduceCompression = "" }, `broker.produce_compression: must be one of none, gzip, snappy, lz4, zstd, got ""`},
		{func(c *Config) { c.ProduceCompression = "GZIP" }, `broker.produce_compression: must be one of none, gzip, snappy, lz4, zstd, got "GZIP"`},
		{func(c *Config) { c.TLS.CAFile = "ca.pem" }, "broker.tls.enabled"},
		{func(c *Config) { c.TLS = TLSConfig{Enabled: true, CertFile: "c.pem"} }, "broker.tls.cert_file"},
		{func(c *Config) { c.SASL.Mechanism = "GSSAPI" }, `broker.sasl.mechanism: must be one of "", PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, got "GSSAPI"`},
		{func(c *Config) { c.SASL.Mechanism = SASLScramSHA512 }, "broker.sasl.username"},
	} {
		cfg := DefaultConfig()
		tc.edit(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("got %v, want prefix %q", err, tc.want)
		}
		if _, err := New(cfg, nil); err == nil {
			t.Errorf("New accepted an invalid config (%s)", tc.want)
		}
	}
}

func TestConfigYAML(t *testing.T) {
	in := `
seeds: ["k1:9092", "k2:9093"]
client_id: gw
max_fetch_bytes: 1048576
request_timeout: 3s
metadata_max_age: 1m
fetch_connections_per_broker: 4
read_ahead_bytes: 32768
produce_compression: zstd
tls: {enabled: true, ca_file: /ca.pem, server_name: kafka}
sasl: {mechanism: SCRAM-SHA-512, username: u, password: p}
`
	cfg := DefaultConfig()
	if err := yaml.Unmarshal([]byte(in), &cfg); err != nil {
		t.Fatal(err)
	}
	want := Config{
		Seeds: []string{"k1:9092", "k2:9093"}, ClientID: "gw", MaxFetchBytes: 1 << 20,
		RequestTimeout: 3 * time.Second, MetadataMaxAge: time.Minute, FetchConnectionsPerBroker: 4, LongPollConnectionsPerBroker: 256,
		MergeFetchesAfter: 1, MergeWaitMax: 5 * time.Millisecond, ReadAheadBytes: 32 << 10, ReadAheadMaxBytes: 64 << 20,
		ProduceCompression: CompressionZstd,
		TLS:                TLSConfig{Enabled: true, CAFile: "/ca.pem", ServerName: "kafka"},
		SASL:               SASLConfig{Mechanism: SASLScramSHA512, Username: "u", Password: "p"},
	}
	if fmt.Sprint(cfg) != fmt.Sprint(want) || cfg.SASL.Password != "p" {
		t.Fatalf("got %+v, want %+v", cfg, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// The CA file does not exist: New says which field is wrong.
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "broker.tls.ca_file") {
		t.Fatalf("New with a missing CA file: %v", err)
	}
}

func TestSASLPasswordNeverPrinted(t *testing.T) {
	const secret = "hunter2-secret"
	s := SASLConfig{Mechanism: SASLPlain, Username: "alice", Password: secret}
	cfg := DefaultConfig()
	cfg.SASL = s

	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	log.Info("sasl", zap.Object("sasl", s), zap.Any("any", s), zap.Stringer("str", s))
	log.Info("config", zap.Object("config", cfg), zap.Any("any", cfg))
	var logged strings.Builder
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	for _, entry := range logs.All() {
		buf, err := enc.EncodeEntry(entry.Entry, entry.Context)
		if err != nil {
			t.Fatal(err)
		}
		logged.Write(buf.Bytes())
	}
	for name, out := range map[string]string{
		"%v": fmt.Sprintf("%v", s), "%+v": fmt.Sprintf("%+v", s), "%#v": fmt.Sprintf("%#v", s),
		"%s": fmt.Sprintf("%s", s), "config %+v": fmt.Sprintf("%+v", cfg), "json": string(js), "zap": logged.String(),
	} {
		if strings.Contains(out, secret) {
			t.Errorf("%s prints the password: %s", name, out)
		}
		if !strings.Contains(out, "alice") {
			t.Errorf("%s lost the username: %s", name, out)
		}
	}
}
