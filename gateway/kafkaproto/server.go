package kafkaproto

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/internal/quietio"
	"github.com/capgate/capgate/internal/refusallog"
	"github.com/capgate/capgate/ocap"
)

// Server is the gateway's Kafka listener. Start it once, Close it once;
// safe for concurrent use.
type Server struct {
	cfg  Config
	gate Gate
	auth Authenticator
	log  *zap.Logger
	// refused logs connections refused at max_connections, bounded: a
	// flood of connections must not flood the log too.
	refused *refusallog.Log
	// commitPolicy logs commits refused by policy (commitpolicy.go).
	commitPolicy *commitPolicyLog
	// missing logs topics clients name that Kafka does not have (missingtopics.go).
	missing *missingTopicLog

	lns   []net.Listener // one per fetch lane, lane 0 first
	nodes []node         // the advertised brokers: Peers, or this gateway alone
	self  int            // this gateway's index in nodes
	lanes []node         // this gateway as client-credential connections see it: FetchLanes nodes, lane 0 = nodes[self]

	topics *topicCache
	// regexes bounds the listener's KIP-848 regex matching (regexwork.go).
	regexes regexWork
	groups  *groups
	// tenants reads a tenant's own groups for ListGroups, DescribeGroups
	// and OffsetFetch without a member (tenantgroups.go), made once.
	tenantsOnce sync.Once
	tenants     *tenantGroups
	// requests bounds the request bytes held (requestbudget.go).
	requests *requestBudget
	// aheadBudget is what read-aheads may still reserve (bytes).
	aheadBudget atomic.Int64

	base context.Context // ends at Close: every connection and session
	stop context.CancelFunc

	mu    sync.Mutex
	conns map[*conn]struct{}
	// byIdentity counts authenticated connections per identity
	// (identityKey), for MaxConnectionsPerPrincipal.
	byIdentity map[string]int
	// byTenant counts them per tenant (tenantKey), for
	// MaxConnectionsPerTenant.
	byTenant map[string]int
	// byAddr counts connections per client address (registry.go).
	byAddr map[netip.Addr]*addrConns
	// refusedConns and evicted count for the metrics (registry.go).
	refusedConns [limitCount]atomic.Uint64
	evicted      atomic.Uint64
	expired      atomic.Uint64
	// membersEvicted counts members closed for another tenant's join
	// (groups.evict).
	membersEvicted atomic.Uint64
	// membersEvictionsPaced counts joins refused for their tenant's
	// eviction within kafka_member_eviction_interval (groups.paceLocked).
	membersEvictionsPaced atomic.Uint64
	closed                bool
	wg                    sync.WaitGroup // accept loop, connections, member sessions
}

// node is one advertised broker.
type node struct {
	id   int32
	host string
	port int32
}

// New validates cfg and builds a listener; it listens at Start. A nil
// auth accepts capgate tokens (capabilities and client credentials) and
// the JWTs of cfg.OIDC's issuers.
func New(cfg Config, gate Gate, auth Authenticator, log *zap.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	if auth == nil {
		auth = gateAuthenticator{gate: gate, issuers: issuerNames(cfg.OIDC)}
		if len(cfg.OIDC.Issuers) > 0 {
			v, err := identity.New(cfg.OIDC, log.Named("oidc"))
			if err != nil {
				return nil, err
			}
			auth = idpAuthenticator{capgate: auth, gate: gate, verifier: v, timeout: cfg.OIDC.FetchTimeout}
		}
	}
	s := &Server{cfg: cfg, gate: gate, auth: auth, log: log, refused: refusallog.New(log), commitPolicy: newCommitPolicyLog(log), missing: newMissingTopicLog(log), conns: map[*conn]struct{}{},
		byIdentity: map[string]int{}, byTenant: map[string]int{}, byAddr: map[netip.Addr]*addrConns{}}
	s.base, s.stop = context.WithCancel(context.Background())
	s.topics = newTopicCache(gate.Broker(), topicCacheAge)
	s.aheadBudget.Store(cfg.ReadAheadBytes)
	s.requests = newRequestBudget(cfg.MaxRequestBytesHeld, cfg.MaxRequestBytesHeldPerTenant)
	s.groups = newGroups(s)
	return s, nil
}

// topicCacheAge is how long the topic list from Kafka is reused.
const topicCacheAge = 5 * time.Second

// Start listens and serves in the background.
func (s *Server) Start() error {
	lns, err := s.listen()
	if err != nil {
		return err
	}
	bound := make([]string, len(lns))
	for i, ln := range lns {
		bound[i] = ln.Addr().String()
	}
	if err := s.layout(bound); err != nil {
		for _, ln := range lns {
			ln.Close()
		}
		return err
	}
	for _, ln := range lns {
		if s.cfg.SendBufferBytes > 0 {
			ln = sendBufferListener{ln, s.cfg.SendBufferBytes}
		}
		ln = quietio.Listener(ln) // raw socket calls: no monitor-thread wake per request (internal/quietio)
		if s.cfg.WrapListener != nil {
			ln = s.cfg.WrapListener(ln)
		}
		s.lns = append(s.lns, ln)
		s.wg.Add(1)
		go s.accept(ln)
	}
	var lanes []string
	for _, n := range s.lanes {
		lanes = append(lanes, n.addr())
	}
	s.log.Info("kafka listener started (group clients must reach every fetch lane)", zap.Strings("addrs", bound), zap.String("advertised", s.advertised()),
		zap.Strings("advertised_lanes", lanes), zap.Bool("tls", s.cfg.WrapListener != nil))
	return nil
}

// listen binds every fetch lane: lane 0 at Listen, lane j at Listen's
// port + j — or, when that port is 0, at a free port of its own.
// Distinct addresses, not several node ids at one: librdkafka takes
// brokers that share an address for one broker whose node id changes
// (kcat's group consumer then never fetched three of its four
// partitions).
func (s *Server) listen() ([]net.Listener, error) {
	host, _, _ := net.SplitHostPort(s.cfg.Listen)
	port := portOf(s.cfg.Listen) // Validate: numeric
	var lns []net.Listener
	for j := range s.cfg.FetchLanes {
		p := 0
		if port != 0 {
			p = port + j
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("kafkaproto: listen (fetch lane %d of gateway.kafka_fetch_lanes %d): %w", j, s.cfg.FetchLanes, err)
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// layout fixes the advertised brokers once the lanes' addresses are known.
func (s *Server) layout(bound []string) error {
	self := s.cfg.Advertised
	if self == "" {
		host, _, _ := net.SplitHostPort(bound[0])
		if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			return fmt.Errorf("gateway.kafka_advertised: must be set when listening on %s", bound[0])
		}
		self = bound[0]
	}
	peers := s.cfg.Peers
	if len(peers) == 0 {
		peers = []string{self}
	}
	for i, p := range peers {
		host, port, _ := net.SplitHostPort(p)
		n, err := strconv.Atoi(port)
		if err != nil {
			return fmt.Errorf("gateway.kafka_peers: bad port in %q", p)
		}
		s.nodes = append(s.nodes, node{id: int32(i), host: host, port: int32(n)})
	}
	s.self = nodeIndex(peers, self)
	// Lane j of gateway i is node i + j×len(peers), at its own address:
	// advertised port + j, or (nothing advertised) where it is bound.
	// Lane 0 is the gateway's own node; no two gateways' lanes share an id.
	for j := range s.cfg.FetchLanes {
		n := s.nodes[s.self]
		n.id += int32(j * len(s.nodes))
		if j > 0 {
			if s.cfg.Advertised != "" {
				n.port += int32(j)
			} else {
				n.port = int32(portOf(bound[j]))
			}
		}
		s.lanes = append(s.lanes, n)
	}
	return nil
}

func (s *Server) advertised() string { return s.nodes[s.self].addr() }

// internalTopic reports a topic no client is granted (Config.InternalTopic).
func (s *Server) internalTopic(topic string) bool {
	if s.cfg.InternalTopic != nil {
		return s.cfg.InternalTopic(topic)
	}
	return ocap.InternalTopic(topic)
}

func (n node) addr() string { return net.JoinHostPort(n.host, strconv.Itoa(int(n.port))) }

// Addr is the address the listener (its lane 0) is bound to (after
// Start).
func (s *Server) Addr() string {
	if len(s.lns) == 0 {
		return ""
	}
	return s.lns[0].Addr().String()
}

// accept serves one lane's listener: every lane serves every request.
// A failed accept other than a closed listener (out of file descriptors,
// say) is retried after a pause growing to a second, as net/http does:
// giving up would leave a lane advertised that nobody serves.
func (s *Server) accept(ln net.Listener) {
	defer s.wg.Done()
	var pause time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			s.log.Warn("kafka listener accept failed; retrying", zap.String("addr", ln.Addr().String()), zap.Duration("after", pause), zap.Error(err))
			select {
			case <-time.After(pause):
			case <-s.base.Done():
				return
			}
			continue
		}
		pause = 0
		c, ok := s.register(nc)
		if !ok {
			nc.Close()
			continue
		}
		go c.serve()
	}
}

// Connections is the number of open connections.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Close stops accepting, closes every connection (requests in flight are
// cancelled), ends every member session (each leaves its group), and
// waits until all of them are gone.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, ln := range s.lns {
		ln.Close()
	}
	s.stop()
	for _, c := range conns {
		c.nc.Close()
	}
	s.groups.closeAll()
	s.wg.Wait()
	if s.tenants != nil { // every connection has ended: nothing makes it now
		s.tenants.http.CloseIdleConnections()
	}
	s.log.Info("kafka listener stopped")
	return nil
}
