package gateway

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/config"
	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/internal/clientaddr"
	"github.com/capgate/capgate/internal/coordinators"
	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/tlsconf"
)

// Config is the gateway section of capgate's configuration.
type Config struct {
	// ID names this gateway to the coordinator (sync polls, admin views);
	// each gateway needs its own. "" (the default) derives one per process
	// (GatewayID): the host name and the listen port.
	ID string `yaml:"id"`
	// Listen is the HTTP listen address; port 0 picks a free port (see Addr).
	Listen string `yaml:"listen"`

	// CoordinatorURL is the coordinator's base URL for the sync channel,
	// or the base URLs of its replicas, comma-separated: the gateway polls
	// the first, follows a replica's not_leader answer to the leader it
	// names (when listed here) at once, and moves to the next URL when
	// the one in use is unreachable (internal/coordinators).
	CoordinatorURL string `yaml:"coordinator_url"`
	// SyncToken is the bearer credential of the sync channel. Never logged.
	SyncToken Secret `yaml:"sync_token"`
	// SyncWait is how long one sync poll may be held by the coordinator.
	SyncWait time.Duration `yaml:"sync_wait"`
	// SyncTimeout: with no successful sync for this long, counted from when
	// the last good poll was sent, the gateway refuses every fetch and
	// produce with 503 out_of_sync until it has synced again. It must be
	// below the coordinator's gateway_timeout minus max_clock_skew, which
	// the gateway learns from the sync channel: it is not ready otherwise.
	//
	// What capabilities must carry (iss, aud), the leeway and lease cap of
	// their checks are the coordinator's, learned on every sync reset
	// (api.CoordinatorSettings); they are not configured here.
	SyncTimeout time.Duration `yaml:"sync_timeout"`

	// TokenCacheEntries bounds the verified-token cache.
	TokenCacheEntries int `yaml:"token_cache_entries"`

	// MaxWait caps a fetch's max_wait_ms (the long poll).
	MaxWait time.Duration `yaml:"max_wait"`
	// MaxInflightFetches bounds the fetches this gateway serves at once
	// (long polls included): beyond it a fetch is refused 503 overloaded,
	// and a client tries another gateway.
	MaxInflightFetches int `yaml:"max_inflight_fetches"`
	// MaxInflightFetchesPerHolder bounds the fetches of one holder at
	// once, the holder being the root of the capability's chain (chn[0],
	// else its jti): beyond it a fetch is refused 429 too_many_fetches.
	MaxInflightFetchesPerHolder int `yaml:"max_inflight_fetches_per_holder"`
	// MaxInflightFetchesPerTenant bounds the fetches of one tenant at
	// once, the tenant being whom the coordinator granted the capability
	// to (its tnt claim: the member's OAuth client, IdP identity or client
	// credential; else its sub): beyond it a fetch is refused 429
	// too_many_fetches. Every join mints capabilities of their own, so
	// without it one credential's many holders took every fetch of the
	// gateway. 0 (the default): a quarter of max_inflight_fetches (at
	// least 1); never above max_inflight_fetches.
	MaxInflightFetchesPerTenant int `yaml:"max_inflight_fetches_per_tenant"`
	// MaxAnswerBytesHeld bounds the bytes of fetch answers this gateway
	// holds while its clients read them (answers of 16 KiB and more):
	// beyond it a fetch is refused 503 overloaded after the broker
	// answered, and a client tries another gateway.
	// MaxAnswerBytesHeldPerHolder bounds one holder's (429
	// too_many_fetches beyond): a client that opens many connections and
	// reads none of its answers holds at most this much of the gateway's
	// memory, up to write_timeout each. One answer is always let through
	// when nothing is held, as Kafka serves a first batch whole.
	MaxAnswerBytesHeld          int64 `yaml:"max_answer_bytes_held"`
	MaxAnswerBytesHeldPerHolder int64 `yaml:"max_answer_bytes_held_per_holder"`
	// MaxConnections bounds the HTTP connections served at once (idle
	// keep-alive ones too): beyond it a new connection is answered 503
	// overloaded (JSON, Retry-After; no request was read) and closed
	// (internal/connguard). MaxConnectionsPerAddress bounds those from
	// one client address (the socket's peer; IPv6 per /64; a peer in
	// trusted_proxies only by max_connections): one client cannot take
	// every slot. Above max_connections it is max_connections.
	MaxConnections           int `yaml:"max_connections"`
	MaxConnectionsPerAddress int `yaml:"max_connections_per_address"`
	// DefaultFetchBytes is a fetch's max_bytes when the request names none;
	// MaxFetchBytes clamps the ones it names.
	DefaultFetchBytes int32 `yaml:"default_fetch_bytes"`
	MaxFetchBytes     int32 `yaml:"max_fetch_bytes"`

	// HTTP server limits. MaxHeaderBytes bounds the request line plus
	// headers (431 beyond), MaxBodyBytes a request body (413 beyond).
	ReadTimeout     time.Duration `yaml:"read_timeout"`
	WriteTimeout    time.Duration `yaml:"write_timeout"`
	IdleTimeout     time.Duration `yaml:"idle_timeout"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	MaxHeaderBytes  int           `yaml:"max_header_bytes"`
	MaxBodyBytes    int           `yaml:"max_body_bytes"`
	// MaxBodyBytesHeld bounds the request bodies over 4 KiB (a producing
	// bearer's) the gateway reads at once, counted from their headers
	// (fasthttp allocates a body at its Content-Length before it
	// arrives; a chunked one counts max_body_bytes) until answered: 503
	// overloaded beyond, the body not read. MaxBodyBytesHeldPerHolder
	// bounds one holder's (the chain root; a client credential's jti):
	// 429 too_many_fetches beyond. bodyheld.go.
	MaxBodyBytesHeld          int64 `yaml:"max_body_bytes_held"`
	MaxBodyBytesHeldPerHolder int64 `yaml:"max_body_bytes_held_per_holder"`
	// MaxProduceRecords bounds the records of one produce (400 beyond):
	// each costs the gateway far more than its bytes in the body (an
	// empty record is 3 bytes of JSON, some 600 bytes decoded and sent).
	MaxProduceRecords int `yaml:"max_produce_records"`

	// RateLimitEntries bounds the per-capability byte-rate buckets.
	RateLimitEntries int `yaml:"rate_limit_entries"`
	// AuthFailuresPerSecond and AuthFailureBurst budget the tokens that
	// fail verification per client address (IPv6: per /64; the HTTP API
	// and the Kafka listener alike): past auth_failure_burst failures,
	// further tokens the gateway has not verified before are refused
	// unchecked — 429 rate_limited with Retry-After, a refused SASL
	// handshake — until the budget refills at auth_failures_per_second.
	// A forged token costs a signature check and is never cached; this
	// keeps one client's forgeries from spending the CPU others' fetches
	// need. Capabilities already verified (cached) are never affected,
	// and past the burst a token whose holder (a capability's tenant,
	// tnt; else iss and sub) verified from the address before is still
	// checked, on a tenth of this budget per (address, holder): a
	// neighbour's forgeries do not lock out the renewals of holders the
	// address has already seen (auth.go newAuthGuard). The Kafka
	// listener's IdP tokens (kafka_oidc) take the same budget. 0 per
	// second turns the budget off.
	AuthFailuresPerSecond float64 `yaml:"auth_failures_per_second"`
	AuthFailureBurst      int     `yaml:"auth_failure_burst"`
	// TrustedProxies lists the networks (CIDRs, or single addresses) of
	// the load balancers or ingress proxies in front of the HTTP listener:
	// a request whose connection comes from one of them is counted against
	// the client X-Forwarded-For names (internal/clientaddr: the hops
	// walked from the right, trusted ones skipped, a malformed one
	// stopping at the last proxy) in the per-address budgets above and
	// their logs. Empty (the default): the connection's address, and the
	// header is never read. At most 256 networks; a /0 is refused. The
	// Kafka listener always counts the connection's address.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// PprofListen, when set, serves the Go runtime profiles
	// (/debug/pprof/) on this address to callers bearing the sync token.
	PprofListen string `yaml:"pprof_listen"`

	// MonitorLabelsMax bounds the distinct QoS monitor tags used as metric
	// labels; later tags are counted as "other".
	MonitorLabelsMax int `yaml:"monitor_labels_max"`

	// TLS configures the listener's TLS and the consumers' client
	// certificates (off while tls.cert_file is empty).
	TLS TLSConfig `yaml:"tls"`
	// CoordinatorTLS is the sync client's TLS toward an https
	// coordinator_url: the CA bundle, and a client certificate when the
	// coordinator's tls.sync asks for one.
	CoordinatorTLS tlsconf.ClientConfig `yaml:"coordinator_tls"`

	// Broker configures the Kafka client.
	Broker broker.Config `yaml:"broker"`

	// KafkaListen turns on the Kafka-protocol listener (gateway/kafkaproto)
	// at this host:port; "" (the default) keeps it off.
	KafkaListen string `yaml:"kafka_listen"`
	// KafkaAdvertised is the host:port Kafka clients are told to connect
	// to; "" advertises the listener's own address.
	KafkaAdvertised string `yaml:"kafka_advertised"`
	// KafkaPeers lists every gateway's advertised Kafka address, this one
	// included, in the same order everywhere: connections authenticated
	// with a partition capability see them all as brokers.
	KafkaPeers []string `yaml:"kafka_peers"`
	// KafkaFetchLanes is how many brokers this gateway is advertised as
	// to group clients (client credentials): a Kafka client keeps one
	// Fetch in flight per broker. Lane j listens at KafkaListen's port + j
	// and is advertised at KafkaAdvertised's port + j.
	KafkaFetchLanes int `yaml:"kafka_fetch_lanes"`
	// KafkaHeartbeatInterval is handed to KIP-848 group members: it is how
	// soon a handoff reaches them.
	KafkaHeartbeatInterval time.Duration `yaml:"kafka_heartbeat_interval"`
	// KafkaSessionTimeoutMin/Max bound the session timeouts classic group
	// members ask for; KafkaMemberSessionTimeout is KIP-848 members' (the
	// broker's group.consumer.session.timeout.ms).
	KafkaSessionTimeoutMin    time.Duration `yaml:"kafka_session_timeout_min"`
	KafkaSessionTimeoutMax    time.Duration `yaml:"kafka_session_timeout_max"`
	KafkaMemberSessionTimeout time.Duration `yaml:"kafka_member_session_timeout"`
	// KafkaMaxRequestBytes bounds one request frame (Produce included).
	KafkaMaxRequestBytes int32 `yaml:"kafka_max_request_bytes"`
	// KafkaMaxRequestBytesHeld bounds the request bytes the Kafka
	// listener holds, all connections together, and
	// KafkaMaxRequestBytesHeldPerTenant one tenant's (a credential and
	// the capabilities of its members): a frame over 64 KiB reserves its
	// size before it is read and holds it until answered; one without
	// room waits, not reading, up to read_timeout, then its connection
	// is closed. Per tenant at least kafka_max_request_bytes.
	KafkaMaxRequestBytesHeld          int64 `yaml:"kafka_max_request_bytes_held"`
	KafkaMaxRequestBytesHeldPerTenant int64 `yaml:"kafka_max_request_bytes_held_per_tenant"`
	// KafkaMaxRequestPartitions bounds the partitions (and, apart, the
	// topic entries) one Fetch, ListOffsets, Produce or OffsetCommit
	// names, the topics one Metadata names and the groups, members,
	// protocols, assignments, topics or keys a group request names: a
	// request over it is refused before it is decoded and the
	// connection closed.
	KafkaMaxRequestPartitions int `yaml:"kafka_max_request_partitions"`
	// KafkaAuthTimeout: SASL must complete this soon after connecting.
	KafkaAuthTimeout time.Duration `yaml:"kafka_auth_timeout"`
	// KafkaIdleTimeout closes connections idle this long.
	KafkaIdleTimeout time.Duration `yaml:"kafka_idle_timeout"`
	// KafkaReauthMax bounds the SASL session of a client that can
	// re-authenticate (KIP-368), as Kafka's connections.max.reauth.ms:
	// it re-authenticates within it (with its token provider's latest
	// token) or its connection is closed. A renewed credential's fetch
	// connection waits at most this (+ request_timeout) for its group
	// connection's carry-over.
	KafkaReauthMax time.Duration `yaml:"kafka_reauth_max"`
	// KafkaMaxConnections bounds open Kafka connections.
	KafkaMaxConnections int `yaml:"kafka_max_connections"`
	// KafkaMaxConnectionsPerAddress bounds the Kafka connections of one
	// client address (the socket's peer, IPv6 per /64; trusted_proxies
	// are not read here): one more is closed at accept, so one address
	// churning connections cannot hold every kafka_max_connections slot.
	// Behind a TCP load balancer that hides the clients' addresses, set
	// it to kafka_max_connections.
	KafkaMaxConnectionsPerAddress int `yaml:"kafka_max_connections_per_address"`
	// KafkaMaxConnectionsPerPrincipal bounds one identity's authenticated
	// Kafka connections (a credential's, an IdP subject's, a capability
	// holder's): one more is refused at SASL, so one tenant cannot hold
	// every kafka_max_connections slot.
	KafkaMaxConnectionsPerPrincipal int `yaml:"kafka_max_connections_per_principal"`
	// KafkaMaxConnectionsPerTenant bounds one tenant's authenticated Kafka
	// connections: a credential's (its OAuth client's, an IdP identity's)
	// own and those of the capabilities granted to the members it joined
	// (their tnt claim) together, since each member is a subject of its
	// own. One more is refused at SASL.
	KafkaMaxConnectionsPerTenant int `yaml:"kafka_max_connections_per_tenant"`
	// KafkaMaxMembers bounds the group members this gateway runs
	// sessions for.
	KafkaMaxMembers int `yaml:"kafka_max_members"`
	// KafkaCoordinatorConnectionsMax bounds the Kafka listener's calls in
	// flight to each coordinator replica (its members' joins, held
	// heartbeats, commits, leaves) and its connections there; more wait
	// their turn. Below the coordinator's max_connections_per_address
	// (1,000), which the gateway's sync polls share.
	KafkaCoordinatorConnectionsMax int `yaml:"kafka_coordinator_connections_max"`
	// KafkaMaxMembersPerTenant bounds one tenant's of them (a credential's
	// OAuth client or jti, an IdP identity), so one credential cannot
	// take every kafka_max_members place and leave other tenants'
	// consumers GROUP_MAX_SIZE_REACHED, which they take as final.
	KafkaMaxMembersPerTenant int `yaml:"kafka_max_members_per_tenant"`
	// KafkaMemberEvictionInterval paces the members a tenant's joins
	// close at kafka_max_members (the newest of the tenant holding the
	// most, over its fair share): at most one a tenant an interval; a
	// join that would close another sooner is COORDINATOR_NOT_AVAILABLE
	// (retriable). 0: no pace.
	KafkaMemberEvictionInterval time.Duration `yaml:"kafka_member_eviction_interval"`
	// KafkaReadAheadBytes bounds the Fetch answers read ahead from Kafka,
	// all connections together (0: no read-ahead).
	KafkaReadAheadBytes int64 `yaml:"kafka_read_ahead_bytes"`
	// KafkaSendBufferBytes is each Kafka connection's socket send buffer
	// (SO_SNDBUF), as Kafka's socket.send.buffer.bytes: what an answer
	// may leave in the kernel, uncounted by max_answer_bytes_held; 0 the
	// system's own (up to tcp_wmem's maximum, 4 MB, a connection).
	KafkaSendBufferBytes int `yaml:"kafka_send_buffer_bytes"`
	// KafkaOIDC lists the IdPs whose JWTs authenticate Kafka clients over
	// SASL (the coordinator's oidc section, repeated: joins are verified
	// again there).
	KafkaOIDC identity.Config `yaml:"kafka_oidc"`
}

// TLSConfig is the gateway listener's TLS and what its record routes
// demand: consumers.auth token (default) or token+certificate (the
// capability and a client certificate signed by client_ca_file whose
// names match consumers.client_names). /healthz, /readyz, /metrics and
// /openapi.json never need a certificate, unless client_auth: require
// makes every handshake need one.
type TLSConfig struct {
	tlsconf.ServerConfig `yaml:",inline"`
	Consumers            tlsconf.Channel `yaml:"consumers"`
}

// DefaultConfig returns the documented defaults; they match the
// coordinator's defaults (issuer capgate-coordinator, audience dev).
func DefaultConfig() Config {
	return Config{
		ID:                "", // derived per process: GatewayID
		Listen:            "127.0.0.1:8080",
		CoordinatorURL:    "http://127.0.0.1:7070",
		SyncWait:          3 * time.Second,
		SyncTimeout:       10 * time.Second,
		TokenCacheEntries: 100_000,
		MaxWait:           30 * time.Second,
		// A long poll holds a broker connection (see
		// broker.long_poll_connections_per_broker) and a goroutine.
		MaxInflightFetches:          4096,
		MaxInflightFetchesPerHolder: 64,
		MaxAnswerBytesHeld:          1 << 30,
		MaxAnswerBytesHeldPerHolder: 64 << 20,
		MaxConnections:              20000,
		MaxConnectionsPerAddress:    2000,
		DefaultFetchBytes:           1 << 20,
		MaxFetchBytes:               8 << 20,
		ReadTimeout:                 10 * time.Second,
		WriteTimeout:                10 * time.Second,
		IdleTimeout:                 60 * time.Second,
		ShutdownTimeout:             10 * time.Second,
		MaxHeaderBytes:              16 << 10,
		MaxBodyBytes:                4 << 20,
		MaxBodyBytesHeld:            256 << 20,
		MaxBodyBytesHeldPerHolder:   64 << 20,
		MaxProduceRecords:           10_000,
		RateLimitEntries:            100_000,
		AuthFailuresPerSecond:       20,
		AuthFailureBurst:            100,
		MonitorLabelsMax:            32,
		TLS:                         TLSConfig{ServerConfig: tlsconf.DefaultServerConfig(), Consumers: tlsconf.DefaultChannel()},
		Broker:                      broker.DefaultConfig(),

		KafkaHeartbeatInterval: 100 * time.Millisecond,
		KafkaSessionTimeoutMin: time.Second,
		KafkaSessionTimeoutMax: 5 * time.Minute,

		KafkaMemberSessionTimeout:         10 * time.Second,
		KafkaMaxRequestBytes:              8 << 20,
		KafkaMaxRequestBytesHeld:          defaultKafkaRequestBytesHeld,
		KafkaMaxRequestBytesHeldPerTenant: defaultKafkaRequestBytesHeldPerTenant,
		KafkaMaxRequestPartitions:         10000, // kafkaproto.DefaultMaxRequestPartitions
		KafkaAuthTimeout:                  10 * time.Second,
		KafkaIdleTimeout:                  10 * time.Minute,
		KafkaReauthMax:                    10 * time.Minute,
		KafkaMaxConnections:               1024,
		KafkaMaxConnectionsPerPrincipal:   256,
		KafkaMaxConnectionsPerAddress:     defaultKafkaConnectionsPerX,
		KafkaMaxConnectionsPerTenant:      defaultKafkaConnectionsPerX,
		KafkaMaxMembers:                   10_000,
		KafkaCoordinatorConnectionsMax:    512,
		KafkaMaxMembersPerTenant:          defaultKafkaMembersPerTenant,
		KafkaMemberEvictionInterval:       30 * time.Second,
		KafkaFetchLanes:                   4,
		KafkaReadAheadBytes:               64 << 20,
		KafkaSendBufferBytes:              102_400,
		KafkaOIDC:                         identity.DefaultConfig(),
	}
}

// Validate reports the first bad setting, naming the field and the value.
func (c Config) Validate() error {
	for _, check := range []func() error{c.validateIdentity, c.validateSync, c.validateTokens, c.validateLimits, c.validateTLS} {
		if err := check(); err != nil {
			return err
		}
	}
	if c.KafkaListen != "" {
		kc := c.kafkaConfig()
		if c.TLS.Enabled() {
			// New wraps the listener in the server's TLS; stand in for it
			// here, so tls.consumers' certificate rule validates.
			kc.WrapListener = func(ln net.Listener) net.Listener { return ln }
		}
		if err := kc.Validate(); err != nil {
			return err
		}
	}
	return c.Broker.Validate()
}

// GatewayID is the id this gateway syncs under: ID, or when "" one
// derived per process, "<host name>:<listen port>" — distinct per
// Kubernetes pod or host, and per listen port on one host. (Two
// processes that still share one id are refused by the coordinator:
// 409 conflict to the second.)
func (c Config) GatewayID() string {
	if c.ID != "" {
		return c.ID
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "gateway"
	}
	_, port, _ := net.SplitHostPort(c.Listen)
	return host + ":" + port
}

func (c Config) validateIdentity() error {
	if id := c.GatewayID(); !ocap.ValidName(id) {
		return fmt.Errorf("gateway.id: must be 1-255 printable characters without '/', not . or .., got %q", id)
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("gateway.listen: must be host:port, got %q%s", c.Listen, config.ListenHint(c.Listen))
	}
	if _, err := clientaddr.Parse("gateway.trusted_proxies", c.TrustedProxies); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(c.PprofListen); c.PprofListen != "" && err != nil {
		return fmt.Errorf("gateway.pprof_listen: must be host:port or empty, got %q", c.PprofListen)
	}
	if _, err := coordinators.New(coordinators.Split(c.CoordinatorURL)); err != nil {
		return fmt.Errorf("gateway.coordinator_url: %w", err)
	}
	return nil
}

func (c Config) validateSync() error {
	switch {
	case c.SyncWait <= 0:
		return fmt.Errorf("gateway.sync_wait: must be > 0, got %s", c.SyncWait)
	case c.SyncTimeout <= 0:
		return fmt.Errorf("gateway.sync_timeout: must be > 0, got %s", c.SyncTimeout)
	case 2*c.SyncWait+syncMargin > c.SyncTimeout:
		// The self-fence clock runs from when the last answered poll was
		// SENT; with polls held for sync_wait, an idle gateway's last
		// answered poll can be 2 × sync_wait old just before the next
		// answer arrives. Anything tighter fences a healthy gateway.
		return fmt.Errorf("gateway.sync_wait: 2 × sync_wait + %s must be <= sync_timeout (%s), got sync_wait %s", syncMargin, c.SyncTimeout, c.SyncWait)
	}
	return nil
}

func (c Config) validateTLS() error {
	if err := c.TLS.ServerConfig.Validate("gateway.tls"); err != nil {
		return err
	}
	if err := c.TLS.Consumers.Validate("gateway.tls.consumers", c.TLS.ServerConfig, true); err != nil {
		return err
	}
	if err := c.CoordinatorTLS.Validate("gateway.coordinator_tls"); err != nil {
		return err
	}
	for _, raw := range coordinators.Split(c.CoordinatorURL) {
		if u, _ := url.Parse(raw); !c.CoordinatorTLS.IsZero() && u.Scheme != "https" {
			return fmt.Errorf("gateway.coordinator_tls: needs https coordinator URLs, got %q", raw)
		}
	}
	return nil
}

// RetiredSettings are the keys of this section that are gone, with what
// replaced them (config.Retired): the gateway learns them from the
// coordinator on every sync reset.
func RetiredSettings() map[string]string {
	learned := "the gateway learns it from the coordinator on every sync reset"
	return map[string]string{
		"issuer":    learned + " (coordinator.id)",
		"audience":  learned + " (coordinator.cluster)",
		"leeway":    learned + " (coordinator.leeway)",
		"max_lease": learned + " (coordinator.max_lease)",
	}
}

// syncMargin covers round trips and scheduling on top of two held polls.
const syncMargin = 500 * time.Millisecond

func (c Config) validateTokens() error {
	if c.TokenCacheEntries <= 0 {
		return fmt.Errorf("gateway.token_cache_entries: must be > 0, got %d", c.TokenCacheEntries)
	}
	return nil
}

func (c Config) validateLimits() error {
	for _, d := range []struct {
		name  string
		value time.Duration
	}{{"max_wait", c.MaxWait}, {"read_timeout", c.ReadTimeout}, {"write_timeout", c.WriteTimeout}, {"idle_timeout", c.IdleTimeout}, {"shutdown_timeout", c.ShutdownTimeout}} {
		if d.value <= 0 {
			return fmt.Errorf("gateway.%s: must be > 0, got %s", d.name, d.value)
		}
	}
	for _, n := range []struct {
		name  string
		value int
	}{{"max_header_bytes", c.MaxHeaderBytes}, {"max_body_bytes", c.MaxBodyBytes}, {"max_produce_records", c.MaxProduceRecords}, {"rate_limit_entries", c.RateLimitEntries}, {"monitor_labels_max", c.MonitorLabelsMax}, {"auth_failure_burst", c.AuthFailureBurst},
		{"max_inflight_fetches", c.MaxInflightFetches}, {"max_inflight_fetches_per_holder", c.MaxInflightFetchesPerHolder}, {"max_connections", c.MaxConnections},
		{"max_connections_per_address", c.MaxConnectionsPerAddress}, {"kafka_max_connections_per_principal", c.KafkaMaxConnectionsPerPrincipal},
		{"kafka_max_connections_per_address", c.KafkaMaxConnectionsPerAddress}, {"kafka_max_connections_per_tenant", c.KafkaMaxConnectionsPerTenant}} {
		if n.value <= 0 {
			return fmt.Errorf("gateway.%s: must be > 0, got %d", n.name, n.value)
		}
	}
	switch {
	case c.KafkaMaxRequestBytesHeld <= 0:
		return fmt.Errorf("gateway.kafka_max_request_bytes_held: must be > 0, got %d", c.KafkaMaxRequestBytesHeld)
	case c.KafkaMaxRequestBytesHeldPerTenant <= 0:
		return fmt.Errorf("gateway.kafka_max_request_bytes_held_per_tenant: must be > 0, got %d", c.KafkaMaxRequestBytesHeldPerTenant)
	case c.AuthFailuresPerSecond < 0 || math.IsNaN(c.AuthFailuresPerSecond) || math.IsInf(c.AuthFailuresPerSecond, 0):
		return fmt.Errorf("gateway.auth_failures_per_second: must be >= 0 (0: no budget), got %v", c.AuthFailuresPerSecond)
	case c.MaxHeaderBytes < ocap.MaxTokenBytes+1024:
		return fmt.Errorf("gateway.max_header_bytes: must be >= %d to fit a capability, got %d", ocap.MaxTokenBytes+1024, c.MaxHeaderBytes)
	case c.MaxFetchBytes <= 0 || c.MaxFetchBytes > c.Broker.MaxFetchBytes:
		return fmt.Errorf("gateway.max_fetch_bytes: must be in [1, broker.max_fetch_bytes (%d)], got %d", c.Broker.MaxFetchBytes, c.MaxFetchBytes)
	case c.DefaultFetchBytes <= 0 || c.DefaultFetchBytes > c.MaxFetchBytes:
		return fmt.Errorf("gateway.default_fetch_bytes: must be in [1, max_fetch_bytes (%d)], got %d", c.MaxFetchBytes, c.DefaultFetchBytes)
	case c.MaxInflightFetchesPerTenant < 0 || c.MaxInflightFetchesPerTenant > c.MaxInflightFetches:
		return fmt.Errorf("gateway.max_inflight_fetches_per_tenant: must be in [0, max_inflight_fetches (%d)] (0: a quarter of max_inflight_fetches), got %d",
			c.MaxInflightFetches, c.MaxInflightFetchesPerTenant)
	case c.MaxAnswerBytesHeldPerHolder < int64(c.MaxFetchBytes):
		return fmt.Errorf("gateway.max_answer_bytes_held_per_holder: must be >= max_fetch_bytes (%d), got %d", c.MaxFetchBytes, c.MaxAnswerBytesHeldPerHolder)
	case c.MaxAnswerBytesHeld < c.MaxAnswerBytesHeldPerHolder:
		return fmt.Errorf("gateway.max_answer_bytes_held: must be >= max_answer_bytes_held_per_holder (%d), got %d", c.MaxAnswerBytesHeldPerHolder, c.MaxAnswerBytesHeld)
	case c.MaxBodyBytesHeldPerHolder < int64(c.MaxBodyBytes):
		return fmt.Errorf("gateway.max_body_bytes_held_per_holder: must be >= max_body_bytes (%d), got %d", c.MaxBodyBytes, c.MaxBodyBytesHeldPerHolder)
	case c.MaxBodyBytesHeld < c.MaxBodyBytesHeldPerHolder:
		return fmt.Errorf("gateway.max_body_bytes_held: must be >= max_body_bytes_held_per_holder (%d), got %d", c.MaxBodyBytesHeldPerHolder, c.MaxBodyBytesHeld)
	}
	return nil
}

// MarshalLogObject logs the settings that matter, the sync token redacted.
func (c Config) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("id", c.GatewayID())
	enc.AddString("listen", c.Listen)
	enc.AddString("coordinator_url", c.CoordinatorURL)
	enc.AddString("sync_token", c.SyncToken.String())
	enc.AddDuration("sync_wait", c.SyncWait)
	enc.AddDuration("sync_timeout", c.SyncTimeout)
	enc.AddDuration("max_wait", c.MaxWait)
	enc.AddBool("tls", c.TLS.Enabled())
	enc.AddString("kafka_listen", c.KafkaListen)
	enc.AddInt("kafka_fetch_lanes", c.KafkaFetchLanes)
	return enc.AddObject("broker", c.Broker)
}

// Secret is a string that never prints: String, GoString, JSON and text
// marshalling all give "[redacted]" (or "" when empty).
type Secret string

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString keeps %#v from printing the secret.
func (s Secret) GoString() string { return `gateway.Secret("` + s.String() + `")` }

// MarshalJSON keeps JSON dumps (and zap.Any) from printing the secret.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalText keeps text and YAML dumps from printing the secret.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// inflightPerTenant is max_inflight_fetches_per_tenant in effect: as
// configured, or when 0 a quarter of max_inflight_fetches (at least 1).
func (c Config) inflightPerTenant() int {
	if c.MaxInflightFetchesPerTenant > 0 {
		return c.MaxInflightFetchesPerTenant
	}
	return max(c.MaxInflightFetches/4, 1)
}
