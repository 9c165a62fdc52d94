package coordinator

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/config"
	"github.com/capgate/capgate/coordinator/console"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/internal/clientaddr"
	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/revocation"
	"github.com/capgate/capgate/store"
)

// Config is the coordinator section of capgate's configuration.
//
// The token lifetimes (capability_lease, max_lease, leeway) are set here
// once and copied into the state machine (groups: has no such keys); the
// gateways learn them, with id, cluster, gateway_timeout and
// max_clock_skew, from the sync channel. Heartbeat and sync-poll wait caps
// live in groups: (heartbeat_wait, sync_wait_max) because the machine
// enforces them.
type Config struct {
	// ID is the coordinator id: the iss of every token it mints.
	ID string `yaml:"id"`
	// Cluster names the gateway pool: the aud of every token.
	Cluster string `yaml:"cluster"`
	// Listen is the HTTP listen address.
	Listen string `yaml:"listen"`
	// DataDir holds the badger store, including the signing key ring
	// (directory 0700, files 0600).
	DataDir string `yaml:"data_dir"`
	// KeyFile, when set, is a key ring made by `capgate keys generate`
	// (mode 0600) imported on first start instead of generating one. Once
	// the store holds a ring the file is not read again: rotate through
	// the admin API.
	KeyFile string `yaml:"key_file"`

	// AdminTokenHashes and SyncTokenHashes are hex SHA-256 digests of the
	// admin and gateway-sync bearer tokens (see GenerateSecret); the
	// tokens themselves are never stored or logged.
	AdminTokenHashes []string `yaml:"admin_token_hashes"`
	SyncTokenHashes  []string `yaml:"sync_token_hashes"`

	// CapabilityLease is the lifetime of a granted or renewed capability.
	CapabilityLease time.Duration `yaml:"capability_lease"`
	// MaxLease caps exp - iat of every capability (admin grants included).
	MaxLease time.Duration `yaml:"max_lease"`
	// Leeway is the clock leeway of token verification (at most 2s).
	Leeway time.Duration `yaml:"leeway"`
	// MemberTokenTTL is the lifetime of a member token; a member rejoins
	// with its member_id (same credential, or its member token) for a new
	// one, which fences its partitions.
	MemberTokenTTL time.Duration `yaml:"member_token_ttl"`
	// ClientCredentialTTLMax caps the ttl of minted client credentials.
	ClientCredentialTTLMax time.Duration `yaml:"client_credential_ttl_max"`

	// MetadataInterval is how often topic metadata is read from Kafka.
	MetadataInterval time.Duration `yaml:"metadata_interval"`
	// MirrorOffsets copies committed offsets into Kafka's group offsets,
	// only into Kafka groups this deployment owns (mirror.go).
	MirrorOffsets bool `yaml:"mirror_offsets"`
	// MirrorOffsetsPrefix is put before a capgate group's name to make
	// the Kafka group the mirror writes (DefaultMirrorOffsetsPrefix).
	// Kafka's group names are shared with the cluster's native consumers
	// and a tenant names its capgate group: the prefix keeps the mirror
	// out of the names native groups use, so a tenant cannot take a
	// native group's name before the native app first commits.
	MirrorOffsetsPrefix string `yaml:"mirror_offsets_prefix"`
	// MirrorOffsetsUnprefixed, with mirror_offsets_prefix "", writes each
	// group under capgate's own name: an empty prefix is refused without
	// it. The ownership check (mirror.go) then keeps the mirror out of
	// native groups that exist, but a name Kafka holds nothing under (a
	// native group not started yet, or whose offsets Kafka expired) is
	// free, and a tenant whose credential covers it decides where that
	// native group starts.
	MirrorOffsetsUnprefixed bool `yaml:"mirror_offsets_unprefixed"`
	// BrokerTimeout bounds one offset lookup (start offsets of grants, lag).
	BrokerTimeout time.Duration `yaml:"broker_timeout"`
	// OffsetCacheTTL is how long a partition's earliest/latest offsets are
	// reused when resolving the start offset of grants.
	OffsetCacheTTL time.Duration `yaml:"offset_cache_ttl"`
	// DescribeLagMax bounds the partitions whose lag one admin describe
	// looks up in Kafka (a topic describe of more partitions shows no
	// offsets).
	DescribeLagMax int `yaml:"describe_lag_max"`
	// GroupLagLabelsMax bounds the groups capgate_coordinator_group_lag
	// labels (those with the largest lag; the others' sum is
	// capgate_coordinator_group_lag_rest). 0, the default, names no
	// group: /metrics answers anyone, and group names are the tenants'
	// (a join names its group), which the API shows only to the group's
	// members and admins. Set it for a /metrics only your Prometheus
	// reaches. One scrape looks up at most describe_lag_max partitions in
	// Kafka.
	GroupLagLabelsMax int `yaml:"group_lag_labels_max"`
	// DescribePageMax bounds the members and the partitions one admin
	// describe (or group or topic list) answers with; DescribeBytesMax bounds the
	// members' estimated JSON (at least one member). Larger groups are
	// read in pages: ?limit=&members_after=&partitions_after=topic/N.
	DescribePageMax  int `yaml:"describe_page_max"`
	DescribeBytesMax int `yaml:"describe_bytes_max"`
	// AuditEntriesMax bounds the admin actions GET /v1/admin/audit keeps
	// in memory (the oldest go first); every action is also a log line.
	AuditEntriesMax int `yaml:"audit_entries_max"`

	// HTTP server limits. MaxHeaderBytes bounds the request line plus
	// headers, the bearer token among them: at least the largest token
	// accepted (oidc.max_token_bytes with issuers, else a capgate token's
	// 4 KiB) plus headerRoomBytes (headerBytesMin).
	MaxBodyBytes   int `yaml:"max_body_bytes"`
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// MaxBodyBytesHeld bounds the request bodies over 4 KiB the
	// coordinator reads at once for tokens of its tenants (client
	// credentials, member tokens, capabilities, IdP tokens; not the admin
	// and sync tokens), counted from their headers (fasthttp allocates a
	// body at its Content-Length before it arrives; a chunked one counts
	// max_body_bytes) until answered: 503 overloaded beyond, the body not
	// read. MaxBodyBytesHeldPerHolder bounds one holder's (a credential,
	// OAuth client or IdP identity with its members' tokens): 429
	// rate_limited beyond. internal/bodyheld.
	MaxBodyBytesHeld          int64         `yaml:"max_body_bytes_held"`
	MaxBodyBytesHeldPerHolder int64         `yaml:"max_body_bytes_held_per_holder"`
	ReadTimeout               time.Duration `yaml:"read_timeout"`
	WriteTimeout              time.Duration `yaml:"write_timeout"`
	IdleTimeout               time.Duration `yaml:"idle_timeout"`
	ShutdownTimeout           time.Duration `yaml:"shutdown_timeout"`
	MaxConnections            int           `yaml:"max_connections"`
	// MaxConnectionsPerAddress bounds the HTTP connections from one
	// client address (the socket's peer; IPv6 per /64; a peer in
	// trusted_proxies only by max_connections), so that one client
	// cannot take every max_connections slot (the sync channel's and
	// every join's too). Beyond either bound a new connection is
	// answered 503 overloaded (JSON, Retry-After) and closed
	// (internal/connguard). Above max_connections it is max_connections.
	MaxConnectionsPerAddress int `yaml:"max_connections_per_address"`
	// TrustedProxies lists the networks (CIDRs, or single addresses) of
	// the load balancers or ingress proxies in front of this listener: a
	// request whose connection comes from one of them is counted against
	// the client X-Forwarded-For names (internal/clientaddr: the hops
	// walked from the right, trusted ones skipped, a malformed one
	// stopping at the last proxy) — in auth_failures_per_second, the
	// OAuth token endpoint's and the console login's failure budgets, and
	// the warnings that name an address. Empty (the default): the
	// connection's address, and the header is never read. At most 256
	// networks; a /0 is refused.
	TrustedProxies []string `yaml:"trusted_proxies"`

	// MaxAnswerBytesHeld bounds the answers of 16 KiB and more to tenants'
	// requests (group reads, offsets, joins' and heartbeats' grants) held
	// while their clients read them, up to write_timeout: a tenant's
	// group read over it is 503 overloaded. MaxAnswerBytesHeldPerTenant
	// bounds one tenant's (its credentials, members, capabilities, IdP
	// identity): a group read over it is 429 rate_limited. An answer to a
	// request that changed state (a join, a heartbeat's grants) is sent
	// and counted whatever it comes to. Each lets an answer through when
	// nothing is held (answers.go).
	MaxAnswerBytesHeld          int64 `yaml:"max_answer_bytes_held"`
	MaxAnswerBytesHeldPerTenant int64 `yaml:"max_answer_bytes_held_per_tenant"`

	// EventQueue bounds the requests waiting for the event loop;
	// EventBatchMax bounds how many it steps before one persist.
	EventQueue    int `yaml:"event_queue"`
	EventBatchMax int `yaml:"event_batch_max"`
	// TokenCacheEntries bounds each verified-token cache (member tokens,
	// capabilities).
	TokenCacheEntries int `yaml:"token_cache_entries"`

	// Rates of what one tenant may ask (ratelimit.go): joins per second
	// per credential (a client credential's jti, an IdP identity, or a
	// member rejoining with its token) and attenuations per second per
	// chain root (chn[0], or the parent's jti), each with a burst; 429
	// rate_limited with Retry-After beyond. RateLimitEntries bounds the
	// keys each table tracks.
	// TenantLoopShare bounds one tenant's member requests (heartbeats,
	// commits, leaves, offset reads; the tenant is the member's: an OAuth
	// client, an IdP identity, else the credential) in the event loop's
	// queue at once; TenantLoopWaiters bounds those waiting for a place,
	// one more is 429 rate_limited with Retry-After (tenantshare.go).
	// What another tenant's request waits behind in the queue is at most
	// TenantLoopShare of each tenant's.
	TenantLoopShare   int `yaml:"tenant_loop_share"`
	TenantLoopWaiters int `yaml:"tenant_loop_waiters"`
	// TenantMemberRate and TenantMemberBurst: the member requests but
	// commits one tenant may send per second (and its capabilities' attenuations,
	// which are refused at once past it, and the capabilities its joins'
	// and heartbeats' answers mint, a token each at most the burst into
	// debt, the rest left for later heartbeats); past the burst a request waits for its
	// token (counted among the waiters), up to 5 s, then 429. The loop's
	// share bounds what another tenant waits behind in the queue; the rate
	// bounds the CPU one tenant's requests take around it.
	TenantMemberRate  float64 `yaml:"tenant_member_rate"`
	TenantMemberBurst int     `yaml:"tenant_member_burst"`
	// TenantCommitRate and TenantCommitBurst: the commits (releases too)
	// one tenant's members and lease holders may send per second, each a
	// write to the store; past the burst a commit waits for its token
	// among the waiters, up to 5 s, then 429. Apart from the member rate:
	// commits shared it and took about half of a low one (an SDK commits
	// again as soon as its last commit is answered), so each capability a
	// member was owed cost it a heartbeat, a token and the commits
	// between (tenantshare.go).
	TenantCommitRate  float64 `yaml:"tenant_commit_rate"`
	TenantCommitBurst int     `yaml:"tenant_commit_burst"`

	// JoinRate and JoinBurst: the joins one tenant (join.go tenant) may
	// send per second, and at once; past them 429 with Retry-After. The
	// burst is a whole service's fleet starting at once (1,000 consumers
	// of one OAuth client: DESIGN's join storm); the rate bounds a
	// crash-looping or hostile one. At 5/s and 20 a fleet of 100 took
	// 16 s to join, rebalancing throughout. What a join makes the
	// coordinator hold is bounded apart (members_per_credential, the
	// tenant's state share), its rejoins by tenant_member_rate.
	JoinRate         float64 `yaml:"join_rate"`
	JoinBurst        int     `yaml:"join_burst"`
	AttenuateRate    float64 `yaml:"attenuate_rate"`
	AttenuateBurst   int     `yaml:"attenuate_burst"`
	RateLimitEntries int     `yaml:"rate_limit_entries"`
	// AuthFailuresPerSecond and AuthFailureBurst budget the tokens that
	// fail verification per client address (IPv6: per /64) — client
	// credentials, IdP tokens, member tokens, capabilities: past the
	// burst, a token not verified before is refused unchecked, 429
	// rate_limited with Retry-After, until the budget refills (a forged
	// token costs a signature check and is never cached) — unless its
	// holder (member, credential name, IdP issuer and subject, a
	// capability's tenant) verified from the address before, or joined
	// from it: that one is still
	// checked, on a tenth of this budget per (address, holder) (auth.go
	// newAuthFailures). 0 per second
	// turns the budget off. Admin and sync secrets are compared by hash
	// (no signature to spend) and are not budgeted here.
	AuthFailuresPerSecond float64 `yaml:"auth_failures_per_second"`
	AuthFailureBurst      int     `yaml:"auth_failure_burst"`
	// MemoryLimit is the memory budget of the coordinator process (0:
	// none). The store maps its write-ahead logs and, as it writes and
	// compacts them, its tables (the state, about twice) beside the Go
	// heap, so the Go runtime is held to MemoryLimit less twice
	// groups.limits.state_bytes and store.MappedBytes (GoMemoryLimit,
	// applied by `capgate coordinator` with debug.SetMemoryLimit), which
	// must leave twice state_bytes (the state with room for the garbage
	// collector) and the store's memtables: MemoryLimit >= 4 ×
	// state_bytes + 3 × store.MappedBytes.
	MemoryLimit int64 `yaml:"memory_limit"`

	// TLS configures the listener's TLS and client certificates.
	TLS TLSConfig `yaml:"tls"`
	// OAuth configures the OAuth2 token endpoint (POST /oauth/token).
	OAuth OAuthConfig `yaml:"oauth"`
	// OIDC lists the identity providers whose JWTs may join as client
	// credentials, and how their claims map to groups and topics.
	OIDC identity.Config `yaml:"oidc"`

	// Groups configures the state machine (sessions, handoffs, gateways).
	Groups group.Config `yaml:"groups"`
	// Broker configures the Kafka client.
	Broker broker.Config `yaml:"broker"`
	// Console configures the operator's console at /console.
	Console console.Config `yaml:"console"`
	// State is where the durable state lives: "badger" (data_dir, one
	// coordinator; the default) or "kafka" (a log in a Kafka topic of the
	// broker section's cluster, kafka_state; the key ring wrapped with a
	// key-encryption key).
	State string `yaml:"state"`
	// KafkaState configures state: kafka.
	KafkaState store.KafkaConfig `yaml:"kafka_state"`
	// Replica configures this process as one of several replicas sharing
	// the Kafka log (state: kafka; replica_config.go).
	Replica ReplicaConfig `yaml:"replica"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	groups := group.DefaultConfig()
	groups.CapabilityLease, groups.MaxLease, groups.Leeway, groups.TokenTTLMax = 0, 0, 0, 0 // set from the top level (machineConfig)
	return Config{
		ID:                        "capgate-coordinator",
		Cluster:                   "dev",
		Listen:                    "127.0.0.1:7070",
		DataDir:                   "./capgate-data/coordinator",
		CapabilityLease:           60 * time.Second,
		MaxLease:                  10 * time.Minute,
		Leeway:                    2 * time.Second,
		MemberTokenTTL:            24 * time.Hour,
		ClientCredentialTTLMax:    30 * 24 * time.Hour,
		MetadataInterval:          10 * time.Second,
		MirrorOffsetsPrefix:       DefaultMirrorOffsetsPrefix,
		BrokerTimeout:             5 * time.Second,
		OffsetCacheTTL:            time.Second,
		DescribeLagMax:            1000,
		GroupLagLabelsMax:         0,
		DescribePageMax:           10000,
		DescribeBytesMax:          4 << 20,
		AuditEntriesMax:           10000,
		MaxBodyBytes:              1 << 20,
		MaxBodyBytesHeld:          256 << 20,
		MaxBodyBytesHeldPerHolder: 16 << 20,
		MaxHeaderBytes:            20 << 10, // oidc.max_token_bytes (16 KiB) + headerRoomBytes and more
		ReadTimeout:               10 * time.Second,
		WriteTimeout:              10 * time.Second,
		IdleTimeout:               60 * time.Second,
		ShutdownTimeout:           10 * time.Second,
		MaxConnections:            10000,
		EventQueue:                4096,
		EventBatchMax:             256,
		TokenCacheEntries:         100000,
		JoinRate:                  50,
		TenantLoopShare:           16,
		TenantLoopWaiters:         1024,
		TenantMemberRate:          5000,
		TenantMemberBurst:         10000,
		TenantCommitRate:          2000,
		TenantCommitBurst:         4000,
		AuthFailuresPerSecond:     20,
		AuthFailureBurst:          100,
		JoinBurst:                 1000,
		AttenuateRate:             10,
		AttenuateBurst:            50,
		RateLimitEntries:          100000,
		MemoryLimit:               1 << 30,
		TLS:                       DefaultTLSConfig(),
		OAuth:                     DefaultOAuthConfig(),
		OIDC:                      identity.DefaultConfig(),
		Groups:                    groups,
		Broker:                    broker.DefaultConfig(),
		Console:                   console.DefaultConfig(),
		State:                     StateBadger,
		KafkaState:                store.DefaultKafkaConfig(),
		Replica:                   DefaultReplicaConfig(),

		MaxConnectionsPerAddress: 1000,

		MaxAnswerBytesHeld:          256 << 20,
		MaxAnswerBytesHeldPerTenant: 32 << 20,
	}
}

// Validate reports the first bad setting, naming the field and the value.
func (c Config) Validate() error {
	checks := []func() error{c.validateIdentity, c.validateTokens, c.validateDurations, c.validateLimits, c.validateGroups, c.validateMirror}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	if err := c.TLS.Validate(); err != nil {
		return err
	}
	if err := c.OAuth.Validate(); err != nil {
		return err
	}
	if err := c.OIDC.Validate("oidc"); err != nil {
		return err
	}
	if err := c.Broker.Validate(); err != nil {
		return err
	}
	if err := c.Console.Validate(); err != nil {
		return err
	}
	return c.validateState()
}

// The durable state backends (Config.State).
const (
	StateBadger = "badger"
	StateKafka  = "kafka"
)

func (c Config) validateState() error {
	switch c.State {
	case StateBadger:
		if !c.Replica.isDefault() { // it would be ignored
			return fmt.Errorf("replica: replicas need state: kafka (they share its state log; state is %s): set state: kafka and kafka_state, or remove the replica section", c.State)
		}
		return c.KafkaState.Validate()
	case StateKafka:
	default:
		return fmt.Errorf("state: must be %s or %s, got %q", StateBadger, StateKafka, c.State)
	}
	if err := c.KafkaState.Validate(); err != nil {
		return err
	}
	if err := c.Replica.Validate(); err != nil {
		return err
	}
	if err := c.validateAdvertiseScheme(); err != nil {
		return err
	}
	if c.KafkaState.Partitions != 1 {
		// One coordinator serves every group from shard 0 until groups are
		// sharded across replicas (issue #11 part 2).
		return fmt.Errorf("kafka_state.partitions: must be 1 until groups are sharded across replicas, got %d", c.KafkaState.Partitions)
	}
	return c.KafkaState.ValidateKEKSource()
}

func (c Config) validateIdentity() error {
	switch {
	case !ocap.ValidName(c.ID):
		return fmt.Errorf("id: must be 1-255 printable characters without '/', not . or .., got %q", c.ID)
	case c.Cluster == "":
		return errors.New("cluster: must not be empty")
	case c.DataDir == "":
		return errors.New("data_dir: must not be empty")
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("listen: must be host:port, got %q%s", c.Listen, config.ListenHint(c.Listen))
	}
	_, err := clientaddr.Parse("trusted_proxies", c.TrustedProxies)
	return err
}

// tokenNotHash says so when a hash setting holds what looks like a token
// itself (43 base64url characters, as capgate keys secret prints its
// token line): "must be 64 hex characters, got 43" left the mix-up to
// the reader (newuser10).
func tokenNotHash(h string) string {
	if b, err := base64.RawURLEncoding.DecodeString(h); err != nil || len(b) != 32 {
		return ": the SHA-256 of a token in hex, as the hash: line of capgate keys secret"
	}
	return ": this looks like a token itself — the coordinator keeps only its hash: put the hash: line capgate keys secret printed with it here (or printf %s TOKEN | sha256sum), and the token where the client sends it"
}

func (c Config) validateTokens() error {
	for _, list := range []struct {
		name   string
		hashes []string
	}{{"admin_token_hashes", c.AdminTokenHashes}, {"sync_token_hashes", c.SyncTokenHashes}} {
		for i, h := range list.hashes {
			if b, err := hex.DecodeString(h); err != nil || len(b) != 32 {
				return fmt.Errorf("%s[%d]: must be 64 hex characters (SHA-256), got %d characters%s", list.name, i, len(h), tokenNotHash(h))
			}
		}
	}
	return nil
}

func (c Config) validateDurations() error {
	positive := []struct {
		name  string
		value time.Duration
	}{
		{"capability_lease", c.CapabilityLease},
		{"member_token_ttl", c.MemberTokenTTL},
		{"client_credential_ttl_max", c.ClientCredentialTTLMax},
		{"metadata_interval", c.MetadataInterval},
		{"broker_timeout", c.BrokerTimeout},
		{"read_timeout", c.ReadTimeout},
		{"write_timeout", c.WriteTimeout},
		{"idle_timeout", c.IdleTimeout},
		{"shutdown_timeout", c.ShutdownTimeout},
	}
	for _, f := range positive {
		if f.value <= 0 {
			return fmt.Errorf("%s: must be > 0, got %s", f.name, f.value)
		}
	}
	switch {
	case c.CapabilityLease < 2*time.Second:
		return fmt.Errorf("capability_lease: must be >= 2s, got %s", c.CapabilityLease)
	case c.MaxLease < c.CapabilityLease:
		return fmt.Errorf("max_lease: must be >= capability_lease (%s), got %s", c.CapabilityLease, c.MaxLease)
	case c.Leeway < 0 || c.Leeway > ocap.MaxLeeway:
		return fmt.Errorf("leeway: must be within [0s, %s], got %s", ocap.MaxLeeway, c.Leeway)
	case c.MemberTokenTTL > c.ClientCredentialTTLMax:
		return fmt.Errorf("member_token_ttl: must be <= client_credential_ttl_max (%s), got %s", c.ClientCredentialTTLMax, c.MemberTokenTTL)
	case c.OffsetCacheTTL < 0:
		return fmt.Errorf("offset_cache_ttl: must be >= 0, got %s", c.OffsetCacheTTL)
	}
	return nil
}

func (c Config) validateLimits() error {
	positive := []struct {
		name  string
		value int
	}{
		{"max_body_bytes", c.MaxBodyBytes},
		{"max_connections", c.MaxConnections},
		{"max_connections_per_address", c.MaxConnectionsPerAddress},
		{"event_queue", c.EventQueue},
		{"event_batch_max", c.EventBatchMax},
		{"token_cache_entries", c.TokenCacheEntries},
		{"join_burst", c.JoinBurst},
		{"attenuate_burst", c.AttenuateBurst},
		{"rate_limit_entries", c.RateLimitEntries},
		{"tenant_loop_share", c.TenantLoopShare},
		{"tenant_loop_waiters", c.TenantLoopWaiters},
		{"tenant_member_burst", c.TenantMemberBurst},
		{"tenant_commit_burst", c.TenantCommitBurst},
		{"auth_failure_burst", c.AuthFailureBurst},
		{"describe_page_max", c.DescribePageMax},
		{"describe_bytes_max", c.DescribeBytesMax},
		{"audit_entries_max", c.AuditEntriesMax},
	}
	for _, f := range positive {
		if f.value <= 0 {
			return fmt.Errorf("%s: must be > 0, got %d", f.name, f.value)
		}
	}
	switch {
	case c.AuthFailuresPerSecond < 0 || math.IsNaN(c.AuthFailuresPerSecond) || math.IsInf(c.AuthFailuresPerSecond, 0):
		return fmt.Errorf("auth_failures_per_second: must be >= 0 (0: no budget), got %v", c.AuthFailuresPerSecond)
	case c.MaxHeaderBytes < c.headerBytesMin():
		return c.headerBytesError()
	case c.MaxBodyBytesHeldPerHolder < int64(c.MaxBodyBytes):
		return fmt.Errorf("max_body_bytes_held_per_holder: must be >= max_body_bytes (%d), got %d", c.MaxBodyBytes, c.MaxBodyBytesHeldPerHolder)
	case c.MaxBodyBytesHeld < c.MaxBodyBytesHeldPerHolder:
		return fmt.Errorf("max_body_bytes_held: must be >= max_body_bytes_held_per_holder (%d), got %d", c.MaxBodyBytesHeldPerHolder, c.MaxBodyBytesHeld)
	case c.MaxAnswerBytesHeldPerTenant < 1:
		return fmt.Errorf("max_answer_bytes_held_per_tenant: must be >= 1, got %d", c.MaxAnswerBytesHeldPerTenant)
	case c.MaxAnswerBytesHeld < c.MaxAnswerBytesHeldPerTenant:
		return fmt.Errorf("max_answer_bytes_held: must be >= max_answer_bytes_held_per_tenant (%d), got %d", c.MaxAnswerBytesHeldPerTenant, c.MaxAnswerBytesHeld)
	case c.DescribeLagMax < 0:
		return fmt.Errorf("describe_lag_max: must be >= 0, got %d", c.DescribeLagMax)
	case c.GroupLagLabelsMax < 0:
		return fmt.Errorf("group_lag_labels_max: must be >= 0, got %d", c.GroupLagLabelsMax)
	case !(c.TenantMemberRate > 0) || math.IsInf(c.TenantMemberRate, 0):
		return fmt.Errorf("tenant_member_rate: must be > 0, got %v", c.TenantMemberRate)
	case !(c.TenantCommitRate > 0) || math.IsInf(c.TenantCommitRate, 0):
		return fmt.Errorf("tenant_commit_rate: must be > 0, got %v", c.TenantCommitRate)
	case !(c.JoinRate > 0) || !(c.AttenuateRate > 0):
		return fmt.Errorf("join_rate and attenuate_rate: must be > 0, got %v and %v", c.JoinRate, c.AttenuateRate)
	case c.MemoryLimit != 0 && c.MemoryLimit < c.memoryFloor():
		return fmt.Errorf("memory_limit: must be 0 or >= 4 × groups.limits.state_bytes + 3 × store.MappedBytes (%d), got %d", c.memoryFloor(), c.MemoryLimit)
	}
	return nil
}

// headerRoomBytes is what max_header_bytes keeps beside the largest
// bearer token: the request line, Host, Content-Type, a proxy's
// forwarding headers.
const headerRoomBytes = 1024

// headerBytesMin is the least max_header_bytes that carries the largest
// bearer token this coordinator accepts: an IdP token of up to
// oidc.max_token_bytes when issuers are configured, else a capgate
// token (ocap.MaxTokenBytes). Below it an accepted token would be 431
// before anyone looked at it (redteam6 #8).
func (c Config) headerBytesMin() int {
	largest := ocap.MaxTokenBytes
	if len(c.OIDC.Issuers) > 0 {
		largest = max(largest, c.OIDC.MaxTokenBytes)
	}
	return largest + headerRoomBytes
}

func (c Config) headerBytesError() error {
	if len(c.OIDC.Issuers) > 0 {
		return fmt.Errorf("max_header_bytes: must be >= oidc.max_token_bytes (%d) + %d, so the IdP tokens accepted fit in a request's headers (431 otherwise): raise max_header_bytes to %d or lower oidc.max_token_bytes; got %d",
			c.OIDC.MaxTokenBytes, headerRoomBytes, c.headerBytesMin(), c.MaxHeaderBytes)
	}
	return fmt.Errorf("max_header_bytes: must be >= %d to fit a capgate token (%d bytes) in a request's headers, got %d", c.headerBytesMin(), ocap.MaxTokenBytes, c.MaxHeaderBytes)
}

// validateGroups checks the machine's settings (with the token lifetimes
// copied in) and how they fit the coordinator's.
func (c Config) validateGroups() error {
	if err := c.machineConfig().Validate(); err != nil {
		return errors.New("groups." + strings.TrimPrefix(err.Error(), "group."))
	}
	// A held heartbeat counts as contact, so heartbeat_wait may exceed a
	// session timeout; but renewals travel in heartbeats, and a member
	// must get one before half its lease is gone.
	if g := c.Groups; g.HeartbeatWait >= c.CapabilityLease/2 {
		return fmt.Errorf("groups.heartbeat_wait: must be < capability_lease/2 (%s) so renewals arrive in time, got %s", c.CapabilityLease/2, g.HeartbeatWait)
	}
	return nil
}

// machineConfig is the state machine's configuration with the token
// lifetimes copied in.
func (c Config) machineConfig() group.Config {
	g := c.Groups
	g.CapabilityLease, g.MaxLease, g.Leeway = c.CapabilityLease, c.MaxLease, c.Leeway
	g.TokenTTLMax = c.tokenTTLMax()
	return g
}

// tokenTTLMax is the longest lifetime of any token the coordinator mints
// and its verifier accepts (capabilities, member tokens, client
// credentials, OAuth credentials): no token lives past its mint time
// plus this, so a deny never needs to hold past now plus this (plus
// leeway and max_clock_skew, the revocation rule).
func (c Config) tokenTTLMax() time.Duration {
	return max(c.MaxLease, c.MemberTokenTTL, c.ClientCredentialTTLMax)
}

// tokenTTLMaxName names the setting tokenTTLMax comes from
// (member_token_ttl is never above client_credential_ttl_max).
func (c Config) tokenTTLMaxName() string {
	if c.MaxLease > c.ClientCredentialTTLMax {
		return "coordinator.max_lease"
	}
	return "coordinator.client_credential_ttl_max"
}

// RetiredSettings are the keys of this section that are gone, with what
// replaced them (config.Retired).
func RetiredSettings() map[string]string {
	top := "set once at the top level of coordinator: and copied into the state machine"
	return map[string]string{
		"groups.leeway":           "coordinator.leeway is " + top,
		"groups.capability_lease": "coordinator.capability_lease is " + top,
		"groups.max_lease":        "coordinator.max_lease is " + top,
	}
}

// gatewaySettings are what every gateway learns on a sync reset.
func (c Config) gatewaySettings() *api.CoordinatorSettings {
	return &api.CoordinatorSettings{
		Issuer: c.ID, Audience: c.Cluster,
		LeewayMs: c.Leeway.Milliseconds(), MaxLeaseMs: c.MaxLease.Milliseconds(),
		GatewayTimeoutMs: c.Groups.GatewayTimeout.Milliseconds(), MaxClockSkewMs: c.Groups.MaxClockSkew.Milliseconds(),
		SilentGateways: c.Groups.SilentGateways, InternalTopics: c.KafkaState.Topics(),
	}
}

// memoryFloor is the least memory_limit the state budget fits in: the
// state twice in the Go heap (with the collector's room) and twice mapped
// by the store, the store's memtables (Go heap), its mapped logs, and as
// much again for requests in flight.
func (c Config) memoryFloor() int64 {
	return 4*c.Groups.Limits.StateBytes + 3*store.MappedBytes
}

// GoMemoryLimit is the Go runtime's share of memory_limit (0: none).
func (c Config) GoMemoryLimit() int64 {
	if c.MemoryLimit == 0 {
		return 0
	}
	return c.MemoryLimit - 2*c.Groups.Limits.StateBytes - store.MappedBytes
}

// revocationRule is the one expiry rule of denied ids and revoked
// members: exp + leeway + max_clock_skew (package revocation).
func (c Config) revocationRule() revocation.Rule {
	return revocation.Rule{Leeway: c.Leeway, MaxClockSkew: c.Groups.MaxClockSkew, Retain: c.Groups.RenewTokenGrace}
}

// verifierConfig is what the coordinator's own verifier and minter check.
func (c Config) verifierConfig() ocap.VerifierConfig {
	return ocap.VerifierConfig{
		Issuer:           c.ID,
		Audience:         c.Cluster,
		Leeway:           c.Leeway,
		MaxLease:         c.MaxLease,
		MaxCredentialTTL: c.ClientCredentialTTLMax,
	}
}
