package broker

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/internal/secretfile"
)

// Config is the broker section of capgate's configuration: how to reach the
// Kafka fleet and how hard to lean on it.
type Config struct {
	// Seeds are the bootstrap brokers, host:port each.
	Seeds []string `yaml:"seeds"`
	// ClientID is the Kafka client id capgate presents to the brokers.
	ClientID string `yaml:"client_id"`
	// MaxFetchBytes is the ceiling for one fetch response's record bytes;
	// a FetchRequest's MaxBytes is clamped to it.
	MaxFetchBytes int32 `yaml:"max_fetch_bytes"`
	// RequestTimeout bounds a produce or metadata call, and how long a
	// fetch keeps retrying a partition whose leader cannot be reached.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// MetadataMaxAge is how long cached leaders and partition counts are
	// trusted before a call refreshes them.
	MetadataMaxAge time.Duration `yaml:"metadata_max_age"`
	// FetchConnectionsPerBroker bounds the fetches in flight to one broker
	// that do not wait there (MaxWait 0, and the first look of every
	// fetch); each owns one connection for one round trip, because a
	// broker answers the requests of one connection strictly one after
	// another. A fetch beyond the bound waits for a free connection
	// (within its ctx).
	FetchConnectionsPerBroker int `yaml:"fetch_connections_per_broker"`
	// LongPollConnectionsPerBroker bounds the long polls in flight to one
	// broker, each on its own connection for up to its MaxWait. A long
	// poll beyond the bound waits for a free connection at most its
	// MaxWait, then answers what is there.
	LongPollConnectionsPerBroker int `yaml:"long_poll_connections_per_broker"`
	// MergeFetchesAfter merges fetches that do not wait: while this many
	// of them are in flight to a broker, later ones queue, and the next
	// one to go carries every queued partition in one Kafka Fetch (one
	// request and one answer for many; a lone fetch never waits for
	// company). Only fetches of at most 64 KiB merge (mergeMaxBytes). 0
	// never merges: each fetch is its own Fetch on its own connection.
	MergeFetchesAfter int `yaml:"merge_fetches_after"`
	// MergeWaitMax bounds how long a fetch waits queued to merge: past
	// it, it goes on a connection of its own (with whatever queued since
	// it), so one slow exchange in flight — a half-open connection, a
	// cold read — costs the fetches behind it this much, not the
	// exchange's whole request_timeout.
	MergeWaitMax time.Duration `yaml:"merge_wait_max"`
	// ReadAheadBytes reads ahead for small fetches in a row (ahead.go): a
	// fetch of less than this many bytes that continues where its
	// partition's last fetch ended asks Kafka for this many, and the
	// partition's next small fetches are answered from what came back
	// (for up to 1 s) without a Kafka exchange. 0 never reads ahead; it
	// is cut to MaxFetchBytes.
	ReadAheadBytes int32 `yaml:"read_ahead_bytes"`
	// ReadAheadMaxBytes bounds the bytes all read-aheads hold together;
	// the oldest go first.
	ReadAheadMaxBytes int64 `yaml:"read_ahead_max_bytes"`
	// ProduceCompression is the codec of the record batches Produce
	// writes (the gateway's HTTP produce, capgate produce): none (the
	// default), gzip, snappy, lz4 or zstd. Consumers read batches as
	// written — the Kafka listener passes them through — so a codec a
	// consumer lacks (KafkaJS has no snappy, lz4 or zstd unless the app
	// registers one) makes it fail on them; gzip every client decodes.
	ProduceCompression string `yaml:"produce_compression"`

	TLS  TLSConfig  `yaml:"tls"`
	SASL SASLConfig `yaml:"sasl"`
}

// TLSConfig configures TLS to the brokers.
type TLSConfig struct {
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of the CAs to trust; empty means the system pool.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and key for mutual TLS.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name checked against the broker certificate;
	// empty means the host of each broker address.
	ServerName         string `yaml:"server_name"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`

	// reloadInterval: how often, at most, the files are re-read
	// (0: tlsconf.DefaultReloadInterval); tests shorten it.
	reloadInterval time.Duration
}

// SASL mechanisms accepted in SASLConfig.Mechanism.
const (
	SASLNone        = ""
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// SASLConfig configures SASL authentication to the brokers. The password is
// never printed: String, GoString, MarshalJSON and MarshalLogObject redact it.
type SASLConfig struct {
	Mechanism string `yaml:"mechanism"`
	Username  string `yaml:"username"`
	Password  string `yaml:"password"`
}

const redacted = "[redacted]"

// DefaultConfig returns the defaults: one local broker, 8 MiB fetches, 10 s
// requests, 30 s metadata, 32 fetch and 256 long-poll connections per
// broker, fetches merged beyond one in flight per broker, 64 KiB read
// ahead for small fetches in a row, 64 MiB held at most, produced batches
// uncompressed.
func DefaultConfig() Config {
	return Config{
		Seeds:                     []string{"127.0.0.1:9092"},
		ClientID:                  "capgate",
		MaxFetchBytes:             8 << 20,
		RequestTimeout:            10 * time.Second,
		MetadataMaxAge:            30 * time.Second,
		FetchConnectionsPerBroker: 32,
		// A long poll is one socket to the broker for up to max_wait;
		// brokers take thousands of connections.
		LongPollConnectionsPerBroker: 256,
		MergeFetchesAfter:            1,
		MergeWaitMax:                 5 * time.Millisecond,
		ReadAheadBytes:               64 << 10,
		ReadAheadMaxBytes:            64 << 20,
		ProduceCompression:           CompressionNone,
	}
}

// Validate checks every field and names the first bad one.
func (c Config) Validate() error {
	if len(c.Seeds) == 0 {
		return fmt.Errorf("broker.seeds: must list at least one host:port, got none")
	}
	for _, seed := range c.Seeds {
		if err := validateHostPort(seed); err != nil {
			return fmt.Errorf("broker.seeds: %w", err)
		}
	}
	switch {
	case c.ClientID == "":
		return fmt.Errorf("broker.client_id: must not be empty")
	case c.MaxFetchBytes <= 0:
		return fmt.Errorf("broker.max_fetch_bytes: must be > 0, got %d", c.MaxFetchBytes)
	case c.MaxFetchBytes > maxFetchBytesLimit:
		return fmt.Errorf("broker.max_fetch_bytes: must be <= %d, got %d", maxFetchBytesLimit, c.MaxFetchBytes)
	case c.RequestTimeout <= 0:
		return fmt.Errorf("broker.request_timeout: must be > 0, got %s", c.RequestTimeout)
	case c.MetadataMaxAge <= 0:
		return fmt.Errorf("broker.metadata_max_age: must be > 0, got %s", c.MetadataMaxAge)
	case c.FetchConnectionsPerBroker <= 0:
		return fmt.Errorf("broker.fetch_connections_per_broker: must be > 0, got %d", c.FetchConnectionsPerBroker)
	case c.LongPollConnectionsPerBroker <= 0:
		return fmt.Errorf("broker.long_poll_connections_per_broker: must be > 0, got %d", c.LongPollConnectionsPerBroker)
	case c.MergeFetchesAfter < 0 || c.MergeFetchesAfter > c.FetchConnectionsPerBroker:
		return fmt.Errorf("broker.merge_fetches_after: must be between 0 and fetch_connections_per_broker (%d), got %d",
			c.FetchConnectionsPerBroker, c.MergeFetchesAfter)
	case c.MergeFetchesAfter > 0 && (c.MergeWaitMax <= 0 || c.MergeWaitMax > c.RequestTimeout):
		return fmt.Errorf("broker.merge_wait_max: must be > 0 and <= request_timeout (%s) while merge_fetches_after > 0, got %s",
			c.RequestTimeout, c.MergeWaitMax)
	case c.ReadAheadBytes < 0 || c.ReadAheadBytes > maxReadAheadBytes:
		return fmt.Errorf("broker.read_ahead_bytes: must be between 0 (off) and %d, got %d", maxReadAheadBytes, c.ReadAheadBytes)
	case c.ReadAheadBytes > 0 && c.ReadAheadMaxBytes < int64(c.ReadAheadBytes):
		return fmt.Errorf("broker.read_ahead_max_bytes: must be >= read_ahead_bytes (%d) while read-ahead is on, got %d",
			c.ReadAheadBytes, c.ReadAheadMaxBytes)
	}
	if _, err := producerCompression(c.ProduceCompression); err != nil {
		return err
	}
	if err := c.TLS.validate(); err != nil {
		return err
	}
	return c.SASL.validate()
}

// maxReadAheadBytes bounds one read-ahead: it is for small fetches, and
// one answer's bytes are copied once per fill.
const maxReadAheadBytes = 4 << 20

// maxFetchBytesLimit keeps one response well inside a broker's default
// socket.request.max.bytes and our own read limit.
const maxFetchBytesLimit = 256 << 20

func validateHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be host:port, got %q", addr)
	}
	n, err := strconv.Atoi(port)
	if host == "" || err != nil || n <= 0 || n > 65535 {
		return fmt.Errorf("must be host:port with a port in 1..65535, got %q", addr)
	}
	return nil
}

func (t TLSConfig) validate() error {
	if !t.Enabled {
		if t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" {
			return fmt.Errorf("broker.tls.enabled: must be true when tls files are set, got false")
		}
		return nil
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return fmt.Errorf("broker.tls.cert_file: cert_file and key_file go together, got cert_file %q key_file %q", t.CertFile, t.KeyFile)
	}
	return nil
}

// build loads the files named in t into a *tls.Config.
// keyFileMax bounds the client key file read (a PEM key is a few KiB).
const keyFileMax = 1 << 20

func (t TLSConfig) build() (*tls.Config, error) {
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // operator's explicit choice
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("broker.tls.ca_file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("broker.tls.ca_file: no PEM certificates in %q", t.CAFile)
		}
	}
	if t.CertFile != "" {
		certPEM, err := os.ReadFile(t.CertFile)
		if err != nil {
			return nil, fmt.Errorf("broker.tls.cert_file: %w", err)
		}
		keyPEM, err := secretfile.Read(t.KeyFile, keyFileMax)
		if err != nil {
			return nil, fmt.Errorf("broker.tls.key_file: %w", err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("broker.tls.cert_file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func (s SASLConfig) validate() error {
	switch s.Mechanism {
	case SASLNone:
		return nil
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
	default:
		return fmt.Errorf("broker.sasl.mechanism: must be one of \"\", PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, got %q", s.Mechanism)
	}
	if s.Username == "" {
		return fmt.Errorf("broker.sasl.username: must not be empty with mechanism %s", s.Mechanism)
	}
	return nil
}

// String prints the mechanism and user, never the password.
func (s SASLConfig) String() string {
	return fmt.Sprintf("{mechanism:%q username:%q password:%s}", s.Mechanism, s.Username, s.redactedPassword())
}

// GoString keeps %#v from printing the password.
func (s SASLConfig) GoString() string { return "broker.SASLConfig" + s.String() }

// MarshalJSON keeps JSON dumps (and zap.Any) from printing the password.
func (s SASLConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{
		"mechanism": s.Mechanism,
		"username":  s.Username,
		"password":  s.redactedPassword(),
	})
}

// MarshalLogObject logs the mechanism and user, never the password.
func (s SASLConfig) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("mechanism", s.Mechanism)
	enc.AddString("username", s.Username)
	enc.AddString("password", s.redactedPassword())
	return nil
}

func (s SASLConfig) redactedPassword() string {
	if s.Password == "" {
		return ""
	}
	return redacted
}

// MarshalLogObject logs the whole config with the SASL password redacted.
func (c Config) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("seeds", fmt.Sprint(c.Seeds))
	enc.AddString("client_id", c.ClientID)
	enc.AddInt32("max_fetch_bytes", c.MaxFetchBytes)
	enc.AddDuration("request_timeout", c.RequestTimeout)
	enc.AddDuration("metadata_max_age", c.MetadataMaxAge)
	enc.AddInt("fetch_connections_per_broker", c.FetchConnectionsPerBroker)
	enc.AddInt("long_poll_connections_per_broker", c.LongPollConnectionsPerBroker)
	enc.AddInt("merge_fetches_after", c.MergeFetchesAfter)
	enc.AddDuration("merge_wait_max", c.MergeWaitMax)
	enc.AddInt32("read_ahead_bytes", c.ReadAheadBytes)
	enc.AddInt64("read_ahead_max_bytes", c.ReadAheadMaxBytes)
	enc.AddString("produce_compression", c.ProduceCompression)
	enc.AddBool("tls", c.TLS.Enabled)
	return enc.AddObject("sasl", c.SASL)
}
