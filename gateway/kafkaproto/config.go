package kafkaproto

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/capgate/capgate/config"
	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/tlsconf"
)

// Config configures the listener. The gateway builds it from its own
// settings (gateway.kafka_*); see config.example.yaml for each.
type Config struct {
	// Listen is the address to listen on (host:port, port 0 picks one).
	Listen string
	// Advertised is the host:port clients are told to connect to; empty
	// means the listener's own address.
	Advertised string
	// Peers are the advertised addresses of every gateway's Kafka
	// listener, this one included, in the same order on every gateway:
	// connections authenticated with a partition capability see all of
	// them as brokers, partitions spread evenly. Empty: this one only.
	Peers []string
	// FetchLanes is how many brokers this gateway is advertised as to a
	// client-credential connection (one node id and one port per lane,
	// the partitions spread over them): a Kafka client keeps one Fetch in
	// flight per broker, so with one lane a group member's partitions are
	// fetched one Fetch at a time (metadata.go). Lane j listens at
	// Listen's port + j (a free port when that is 0) and is advertised
	// at Advertised's port + j (its bound address when none).
	FetchLanes int
	// WrapListener, when set, wraps the listener: the gateway's TLS
	// (clients then use SASL_SSL). Nil: plaintext (SASL_PLAINTEXT).
	WrapListener func(net.Listener) net.Listener
	// Consumers is the gateway's tls.consumers: when it asks for a
	// client certificate (token+certificate), SASL refuses a connection
	// without a verified one whose names it allows, before the token is
	// looked at — the rule the HTTP record routes answer 403
	// client_certificate_required under. The zero value asks for none.
	Consumers tlsconf.Channel
	// ClusterID is reported in Metadata: the gateway pool's audience, as
	// the gateway learned it from the coordinator ("" before).
	ClusterID func() string
	// InternalTopic reports the topics no client is granted (Kafka's own
	// and the coordinator's state topics, as the gateway learned them):
	// Metadata hides them, ListOffsets refuses them. Nil: Kafka's own.
	InternalTopic func(topic string) bool
	// CoordinatorURL is the capgate coordinator (group sessions) and
	// CoordinatorTLS its TLS for an https URL (nil: defaults).
	CoordinatorURL string
	CoordinatorTLS *tlsconf.Client
	// CoordinatorConnectionsMax bounds the members' calls in flight to
	// each coordinator replica at once, held heartbeats too (and the
	// connections open to it): more wait for a slot
	// (client.NewGroupAPI). The gateway's own address is also its sync
	// polls' at the coordinator, which refuses one address past its
	// max_connections_per_address (1,000).
	CoordinatorConnectionsMax int

	// HeartbeatInterval is handed to Kafka group members: how often they
	// heartbeat, hence how fast a handoff reaches them.
	HeartbeatInterval time.Duration
	// SessionTimeoutMin and SessionTimeoutMax bound what classic members
	// ask for; MemberSessionTimeout is the KIP-848 members' (whose
	// protocol leaves it to the broker).
	SessionTimeoutMin    time.Duration
	SessionTimeoutMax    time.Duration
	MemberSessionTimeout time.Duration
	// RequestTimeout bounds one call to the coordinator.
	RequestTimeout time.Duration
	// ShutdownTimeout bounds how long Close lets members release their
	// partitions and leave (the gateway passes three quarters of its
	// shutdown_timeout, keeping the rest for its own leave; 0:
	// RequestTimeout). The shorter of the two applies: a member still
	// leaving then is dropped, and the coordinator expires it after its
	// session timeout, as after a crash.
	ShutdownTimeout time.Duration

	// MaxRequestBytes bounds one request frame after authentication;
	// before it, frames are bounded by PreAuthRequestBytes.
	MaxRequestBytes int32
	// MaxRequestBytesHeld bounds the request bytes all connections hold
	// together, MaxRequestBytesHeldPerTenant one tenant's (tenantKey):
	// a frame over 64 KiB reserves its size before it is read and holds
	// it until answered; one without room waits, not reading, until its
	// read deadline, then its connection is closed (requestbudget.go).
	// 0: no bound.
	MaxRequestBytesHeld          int64
	MaxRequestBytesHeldPerTenant int64
	// MaxRequestPartitions bounds the partitions, and apart the topic
	// entries, one Fetch, ListOffsets, Produce or OffsetCommit names, the
	// topics one Metadata names and the entries of a group request's
	// arrays: a request over it is refused before it is decoded and the
	// connection closed (entries.go).
	MaxRequestPartitions int
	// AuthTimeout: a connection must finish SASL within it.
	AuthTimeout time.Duration
	// ReauthMax bounds the SASL session told to a client that can
	// re-authenticate (SaslAuthenticate v1+), as Kafka's
	// connections.max.reauth.ms: it re-authenticates within it, with its
	// token provider's latest token, or is closed. It also bounds a
	// renewed credential's paused fetches (groups.renewalPending).
	ReauthMax time.Duration
	// ReadTimeout: a request frame, once its first byte arrived, must
	// arrive whole within it (slow clients are cut off).
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one response.
	WriteTimeout time.Duration
	// IdleTimeout closes a connection without requests for this long.
	IdleTimeout time.Duration
	// MaxConnections bounds open connections; more are closed at accept
	// (registry.go: at the bound one not yet authenticated gives way).
	MaxConnections int
	// MaxConnectionsPerAddress bounds the open connections of one client
	// address (internal/connguard's key: the IP, IPv6 per /64): more are
	// closed at accept, so one address churning connections cannot fill
	// MaxConnections. 0: no bound but MaxConnections.
	MaxConnectionsPerAddress int
	// MaxConnectionsPerPrincipal bounds the authenticated connections of
	// one identity (kind, issuer, subject): one more is refused at SASL
	// (SASL_AUTHENTICATION_FAILED, closed), so one tenant cannot hold
	// every MaxConnections slot. 0: no bound.
	MaxConnectionsPerPrincipal int
	// MaxConnectionsPerTenant bounds the authenticated connections of one
	// tenant (tenantKey: a credential's OAuth client or jti, an IdP
	// identity, a capability's tnt — the credential its member joined
	// with), so one credential's many members cannot hold every
	// MaxConnections slot either. 0: no bound.
	MaxConnectionsPerTenant int
	// MaxMembers bounds the group members this gateway runs sessions for.
	MaxMembers int
	// MaxMembersPerTenant bounds one tenant's of them (the tenant that
	// opened each, clientKey.tenant): without it one credential could
	// take every MaxMembers place (redteam19 #4). 0: no bound.
	MaxMembersPerTenant int
	// MemberEvictionInterval paces the places a tenant takes by eviction
	// at MaxMembers (groups.paceLocked): at most one a tenant an interval;
	// a join that would evict sooner is refused retriably. 0: no pace.
	MemberEvictionInterval time.Duration
	// ReadAheadBytes bounds what all connections' read-aheads may hold
	// (readahead.go); 0 turns read-ahead off.
	ReadAheadBytes int64
	// SendBufferBytes is each connection's socket send buffer (SO_SNDBUF,
	// which Linux doubles for its bookkeeping), as Kafka's
	// socket.send.buffer.bytes: what an answer may leave in the kernel
	// uncounted (sendbuffer.go). 0: the system's own (Linux grows it to
	// tcp_wmem's maximum, 4 MB by default).
	SendBufferBytes int
	// MaxWait caps a Fetch's MaxWaitMillis; MaxFetchBytes its MaxBytes.
	MaxWait       time.Duration
	MaxFetchBytes int32

	// OIDC lists the IdPs whose JWTs authenticate over SASL beside
	// capgate's tokens (gateway.kafka_oidc: the coordinator's oidc
	// section, repeated; no issuers: capgate tokens only).
	OIDC identity.Config
}

// PreAuthRequestBytes bounds a frame before SASL completed: only
// ApiVersions, SaslHandshake and SaslAuthenticate are accepted then, and a
// token is at most 4 KiB.
const PreAuthRequestBytes = 64 << 10

// MaxFetchLanes bounds Config.FetchLanes: each lane is one more
// connection a group client opens.
const MaxFetchLanes = 64

// MemberEvictionIntervalMax bounds MemberEvictionInterval: longer, a
// newcomer tenant at a full gateway would wait hours for its places.
const MemberEvictionIntervalMax = time.Hour

// Validate names the first bad setting (gateway.kafka_* names).
func (c Config) Validate() error {
	_, listenPort, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("gateway.kafka_listen: must be host:port, got %q%s", c.Listen, config.ListenHint(c.Listen))
	}
	port, err := strconv.Atoi(listenPort)
	if err != nil || port < 0 || port > 65535 {
		return fmt.Errorf("gateway.kafka_listen: port must be a number in [0, 65535], got %q", c.Listen)
	}
	if c.Advertised != "" {
		if err := validHostPort(c.Advertised); err != nil {
			return fmt.Errorf("gateway.kafka_advertised: %v", err)
		}
	}
	for _, p := range c.Peers {
		if err := validHostPort(p); err != nil {
			return fmt.Errorf("gateway.kafka_peers: %v", err)
		}
	}
	if len(c.Peers) > 0 && c.Advertised == "" {
		return fmt.Errorf("gateway.kafka_advertised: must be set (and listed in kafka_peers) when kafka_peers is, got \"\"")
	}
	if len(c.Peers) > 0 && nodeIndex(c.Peers, c.Advertised) < 0 {
		return fmt.Errorf("gateway.kafka_peers: must list kafka_advertised %q, got %v", c.Advertised, c.Peers)
	}
	for _, d := range []struct {
		name  string
		value time.Duration
	}{{"kafka_heartbeat_interval", c.HeartbeatInterval}, {"kafka_auth_timeout", c.AuthTimeout}, {"kafka_read_timeout", c.ReadTimeout},
		{"kafka_write_timeout", c.WriteTimeout}, {"kafka_idle_timeout", c.IdleTimeout}, {"kafka_session_timeout_min", c.SessionTimeoutMin},
		{"kafka_session_timeout_max", c.SessionTimeoutMax}, {"kafka_member_session_timeout", c.MemberSessionTimeout},
		{"kafka_reauth_max", c.ReauthMax}} {
		if d.value <= 0 {
			return fmt.Errorf("gateway.%s: must be > 0, got %s", d.name, d.value)
		}
	}
	switch {
	case c.SessionTimeoutMax < c.SessionTimeoutMin:
		return fmt.Errorf("gateway.kafka_session_timeout_max: must be >= kafka_session_timeout_min (%s), got %s", c.SessionTimeoutMin, c.SessionTimeoutMax)
	case c.HeartbeatInterval >= c.SessionTimeoutMin:
		return fmt.Errorf("gateway.kafka_heartbeat_interval: must be < kafka_session_timeout_min (%s), got %s", c.SessionTimeoutMin, c.HeartbeatInterval)
	case c.MaxRequestBytes < PreAuthRequestBytes:
		return fmt.Errorf("gateway.kafka_max_request_bytes: must be >= %d, got %d", PreAuthRequestBytes, c.MaxRequestBytes)
	case c.MaxRequestBytesHeld < 0 || c.MaxRequestBytesHeld > 0 && c.MaxRequestBytesHeld < int64(c.MaxRequestBytes):
		return fmt.Errorf("gateway.kafka_max_request_bytes_held: must be >= kafka_max_request_bytes (%d), got %d", c.MaxRequestBytes, c.MaxRequestBytesHeld)
	case c.MaxRequestBytesHeldPerTenant < 0 || c.MaxRequestBytesHeldPerTenant > 0 && c.MaxRequestBytesHeldPerTenant < int64(c.MaxRequestBytes):
		return fmt.Errorf("gateway.kafka_max_request_bytes_held_per_tenant: must be >= kafka_max_request_bytes (%d), got %d", c.MaxRequestBytes, c.MaxRequestBytesHeldPerTenant)
	case c.MaxRequestBytesHeld > 0 && c.MaxRequestBytesHeldPerTenant > c.MaxRequestBytesHeld:
		return fmt.Errorf("gateway.kafka_max_request_bytes_held_per_tenant: must be <= kafka_max_request_bytes_held (%d), got %d", c.MaxRequestBytesHeld, c.MaxRequestBytesHeldPerTenant)
	case c.MaxRequestPartitions <= 0:
		return fmt.Errorf("gateway.kafka_max_request_partitions: must be > 0, got %d", c.MaxRequestPartitions)
	case c.MaxConnections <= 0:
		return fmt.Errorf("gateway.kafka_max_connections: must be > 0, got %d", c.MaxConnections)
	case c.MaxConnectionsPerTenant < 0 || c.MaxConnectionsPerTenant > c.MaxConnections:
		return fmt.Errorf("gateway.kafka_max_connections_per_tenant: must be in [1, kafka_max_connections (%d)], got %d", c.MaxConnections, c.MaxConnectionsPerTenant)
	case c.MaxConnectionsPerAddress < 0 || c.MaxConnectionsPerAddress > c.MaxConnections:
		return fmt.Errorf("gateway.kafka_max_connections_per_address: must be in [1, kafka_max_connections (%d)], got %d", c.MaxConnections, c.MaxConnectionsPerAddress)
	case c.SendBufferBytes != 0 && (c.SendBufferBytes < SendBufferBytesMin || c.SendBufferBytes > SendBufferBytesMax):
		return fmt.Errorf("gateway.kafka_send_buffer_bytes: must be 0 (the system's) or in [%d, %d], got %d", SendBufferBytesMin, SendBufferBytesMax, c.SendBufferBytes)
	case c.ReadAheadBytes < 0:
		return fmt.Errorf("gateway.kafka_read_ahead_bytes: must be >= 0, got %d", c.ReadAheadBytes)
	case c.FetchLanes < 1 || c.FetchLanes > MaxFetchLanes:
		return fmt.Errorf("gateway.kafka_fetch_lanes: must be in [1, %d], got %d", MaxFetchLanes, c.FetchLanes)
	case port != 0 && port+c.FetchLanes-1 > 65535:
		return fmt.Errorf("gateway.kafka_fetch_lanes: lanes listen at kafka_listen's port + 0…%d, past 65535 from %d", c.FetchLanes-1, port)
	case c.Advertised != "" && portOf(c.Advertised)+c.FetchLanes-1 > 65535:
		return fmt.Errorf("gateway.kafka_fetch_lanes: lanes are advertised at kafka_advertised's port + 0…%d, past 65535 from %q", c.FetchLanes-1, c.Advertised)
	case c.FetchLanes > 1 && overlappingLanes(c.Peers, c.FetchLanes) != "":
		return fmt.Errorf("gateway.kafka_peers: %s: every gateway's kafka_fetch_lanes ports (its port + 0…%d) must be its own",
			overlappingLanes(c.Peers, c.FetchLanes), c.FetchLanes-1)
	case c.FetchLanes > 1 && c.Advertised != "" && port == 0:
		return fmt.Errorf("gateway.kafka_listen: must name a port (not 0) with kafka_advertised set and kafka_fetch_lanes %d: lane j is advertised at kafka_advertised's port + j and must listen at kafka_listen's + j", c.FetchLanes)
	case c.needsCertificate() && c.WrapListener == nil:
		return fmt.Errorf("gateway.tls.consumers: %s needs the listener's TLS (gateway.tls.cert_file), got a plaintext Kafka listener", c.Consumers.Auth)
	case c.MaxMembers <= 0:
		return fmt.Errorf("gateway.kafka_max_members: must be > 0, got %d", c.MaxMembers)
	case c.CoordinatorConnectionsMax <= 0:
		return fmt.Errorf("gateway.kafka_coordinator_connections_max: must be > 0, got %d", c.CoordinatorConnectionsMax)
	case c.MaxMembersPerTenant < 0 || c.MaxMembersPerTenant > c.MaxMembers:
		return fmt.Errorf("gateway.kafka_max_members_per_tenant: must be in [1, kafka_max_members (%d)], got %d", c.MaxMembers, c.MaxMembersPerTenant)
	case c.MemberEvictionInterval < 0 || c.MemberEvictionInterval > MemberEvictionIntervalMax:
		return fmt.Errorf("gateway.kafka_member_eviction_interval: must be in [0 (no pace), %s], got %s", MemberEvictionIntervalMax, c.MemberEvictionInterval)
	}
	if len(c.OIDC.Issuers) > 0 {
		return c.OIDC.Validate("gateway.kafka_oidc")
	}
	return nil
}

func validHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return fmt.Errorf("must be host:port, got %q", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return fmt.Errorf("port must be in [1, 65535], got %q", s)
	}
	return nil
}

// overlappingLanes names two peers on one host whose lane port ranges
// [port, port+lanes) overlap ("" when none do): a gateway would advertise
// a lane at another gateway's address, where its clients have no member.
func overlappingLanes(peers []string, lanes int) string {
	for i, a := range peers {
		ha, _, _ := net.SplitHostPort(a)
		for _, b := range peers[i+1:] {
			hb, _, _ := net.SplitHostPort(b)
			if na, nb := portOf(a), portOf(b); ha == hb && na < nb+lanes && nb < na+lanes {
				return fmt.Sprintf("%s and %s", a, b)
			}
		}
	}
	return ""
}

// needsCertificate reports whether Consumers asks for a client
// certificate (its zero value does not).
func (c Config) needsCertificate() bool {
	return c.Consumers.Auth != "" && c.Consumers.NeedsCertificate()
}

// portOf is the port of a validated host:port.
func portOf(addr string) int {
	_, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	return n
}

// nodeIndex is addr's position in peers, -1 when absent.
func nodeIndex(peers []string, addr string) int {
	for i, p := range peers {
		if p == addr {
			return i
		}
	}
	return -1
}
