package coordinator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/coordinator/console"
	"github.com/capgate/capgate/coordinator/driver"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/coordinator/timeline"
	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/internal/answerheld"
	"github.com/capgate/capgate/internal/bodyheld"
	"github.com/capgate/capgate/internal/clientaddr"
	"github.com/capgate/capgate/internal/crlf"
	"github.com/capgate/capgate/internal/probe"
	"github.com/capgate/capgate/internal/refusallog"
	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/store"
	"github.com/capgate/capgate/tlsconf"
)

// Broker is what the coordinator needs from Kafka; *broker.Client
// implements it.
type Broker interface {
	Topics(ctx context.Context) (map[string]int32, error)
	Offsets(ctx context.Context, topic string, partition int32) (earliest, latest int64, err error)
	// The offset mirror's (mirror.go): who owns a Kafka group, and a
	// commit marked as this deployment's.
	GroupOwner(ctx context.Context, group, marker string) (broker.GroupOwner, error)
	CommitMarkedGroupOffsets(ctx context.Context, group, marker string, offsets map[string]map[int32]int64) error
}

// Option changes how New builds a coordinator.
type Option func(*options)

type options struct {
	listener net.Listener
	broker   Broker
	rng      *rand.Rand
	now      func() time.Time
	// backend, when set, is the store to serve from instead of opening
	// one (a replica's promoted log); the coordinator closes it.
	backend store.Backend
	// embedded: a replica's leader, served by the replica's listener —
	// no listener or server of its own (replica.go).
	embedded bool
}

// WithListener serves on ln instead of listening on cfg.Listen (tests pass
// a 127.0.0.1:0 listener). The coordinator closes it.
func WithListener(ln net.Listener) Option {
	return func(o *options) { o.listener = ln }
}

// WithBroker uses b for Kafka instead of a client built from cfg.Broker.
// The caller keeps ownership of b.
func WithBroker(b Broker) Option {
	return func(o *options) { o.broker = b }
}

// WithRand seeds the state machine's member ids (reproducible tests).
func WithRand(r *rand.Rand) Option {
	return func(o *options) { o.rng = r }
}

// Coordinator is the coordinator process: the HTTP APIs of DESIGN §5, the
// event loop owning the group.Machine, the store and the signing keys.
// Its methods are safe for concurrent use.
type Coordinator struct {
	// unknownTopicsRead bounds the metadata reads joins naming unknown
	// topics force (join_topics.go).
	unknownTopicsRead unknownTopicsReadAt
	cfg               Config
	log               *zap.Logger
	now               func() time.Time
	store             store.Backend
	broker            Broker
	owned             *broker.Client // closed by the coordinator when it built it
	keys              *keys
	syncShare         syncShare // the last large sync answer's encoding, shared (syncshare.go)
	tokens            *ocap.Cache
	bodies            *bodyheld.Holds     // request bodies being read (server.go)
	answers           *answerheld.Counter // answers being written (answers.go)
	answersRefused    prometheus.Counter
	joins             *keyedLimiter       // per credential
	joining           joinsInFlight       // authenticated joins in the handler, per group (the join window reads it)
	attenuates        *keyedLimiter       // per chain root
	tenantReads       tenantReads         // tenant group reads in progress, per tenant (tenant_groups.go)
	share             *loopShare          // each tenant's member requests in the loop's queue (tenantshare.go)
	patterns          *patternCache       // join patterns matched outside the loop (patterns.go)
	livePatterns      *group.LivePatterns // new topics matched outside the loop (metadata.go)
	topicMatch        *topicMatching      // tenants whose matching of new topics comes after the change (metadata.go)
	authFailures      *authFailures       // per client address (auth.go)
	proxies           clientaddr.Proxies
	revocations       *revocations
	loop              *loop
	server            *fasthttp.Server
	ln                net.Listener
	tls               *tlsconf.Server // nil: plaintext
	oauth             *oauthRegistry
	identities        *identity.Verifier // IdP tokens at join
	metrics           *metrics
	offsets           *offsetResolver
	kafka             probe.Kafka // Kafka reachability for /readyz (health.go)
	mirror            *mirror
	adminTokens       secretSet
	syncTokens        secretSet
	audit             *auditLog       // admin actions (audit.go)
	refusals          *refusallog.Log // refused sync and admin tokens, rate-limited
	routes            *router
	settings          *api.CoordinatorSettings // what gateways learn on a sync reset
	timeline          *timeline.Feed           // handoff events for the console, fed by the loop
	console           *console.Console
	embedded          bool // a replica's leader (options.embedded)

	topicsMu sync.Mutex
	known    map[string]int32                 // topics as last read from Kafka (poller only)
	topics   atomic.Pointer[map[string]int32] // the same, for handlers

	lifecycle
}

// lifecycle is Run-once and Close-once of a coordinator or a replica.
type lifecycle struct {
	runOnce   sync.Once
	closeOnce sync.Once
	closing   chan struct{}
	ran       chan struct{} // closed when Run returned
}

func newLifecycle() lifecycle {
	return lifecycle{closing: make(chan struct{}), ran: make(chan struct{})}
}

// started claims Run; false when Run was called before or Close came
// first.
func (l *lifecycle) started() bool {
	started := false
	l.runOnce.Do(func() { started = true })
	return started
}

// close asks Run to stop and waits for it; release frees what a never-run
// owner holds.
func (l *lifecycle) close(release func()) {
	l.closeOnce.Do(func() {
		close(l.closing)
		if l.started() {
			close(l.ran)
			release()
		}
	})
	<-l.ran
}

// New opens the store (creating the data directory and a signing key ring
// on first start), restores the state machine from it and prepares the
// HTTP server; Run serves.
func New(cfg Config, log *zap.Logger, opts ...Option) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("coordinator: config: %w", err)
	}
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	if log == nil {
		log = zap.NewNop()
	}
	if o.rng == nil {
		o.rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	proxies, err := clientaddr.Parse("trusted_proxies", cfg.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("coordinator: config: %w", err)
	}
	c := &Coordinator{
		cfg: cfg, log: log, now: o.now, settings: cfg.gatewaySettings(),
		adminTokens:  newSecretSet(cfg.AdminTokenHashes),
		syncTokens:   newSecretSet(cfg.SyncTokenHashes),
		refusals:     refusallog.New(log),
		tokens:       ocap.NewCache(cfg.TokenCacheEntries, cfg.Leeway),
		bodies:       bodyheld.New(cfg.MaxBodyBytesHeld, cfg.MaxBodyBytesHeldPerHolder, cfg.ReadTimeout+time.Second),
		answers:      answerheld.New(cfg.MaxAnswerBytesHeld, cfg.MaxAnswerBytesHeldPerTenant),
		joins:        newKeyedLimiter(cfg.JoinRate, cfg.JoinBurst, cfg.RateLimitEntries),
		attenuates:   newKeyedLimiter(cfg.AttenuateRate, cfg.AttenuateBurst, cfg.RateLimitEntries),
		authFailures: newAuthFailures(cfg.AuthFailuresPerSecond, cfg.AuthFailureBurst, proxies),
		proxies:      proxies,
		lifecycle:    newLifecycle(),
		audit:        newAuditLog(cfg.AuditEntriesMax),
	}
	if err := c.open(o); err != nil {
		c.release()
		return nil, err
	}
	return c, nil
}

// open acquires the store, keys, machine, broker and listener in order;
// on error the caller releases whatever was acquired.
func (c *Coordinator) open(o options) error {
	st, err := o.backend, error(nil)
	if st == nil {
		if st, err = c.openStore(); err != nil {
			return fmt.Errorf("coordinator: %w", err)
		}
	}
	c.store, c.embedded = st, o.embedded
	snap, err := st.Load()
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	c.revocations = newRevocations(c.cfg.revocationRule(), snap.Denied, snap.RevokedMembers)
	if c.oauth, err = loadOAuthClients(snap.Meta, c.cfg.OAuth); err != nil {
		return err
	}
	if c.identities, err = identity.New(c.cfg.OIDC, c.log.Named("oidc")); err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	c.identities.Prefetch(c.now()) // a misconfigured issuer shows in the log at start
	if c.keys, err = loadKeys(st, snap, c.cfg.verifierConfig(), c.cfg.KeyFile, c.now()); err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	restored, err := driver.Load(snap)
	if err != nil {
		return fmt.Errorf("coordinator: restore: %w", err)
	}
	machine, err := group.Restore(c.cfg.machineConfig(), o.rng, restored.Snapshot, c.now())
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	c.share = newLoopShare(c.cfg, machine.MemberTenants())
	c.patterns = newPatternCache(machine.TopicNames())
	c.livePatterns = machine.LivePatterns()
	c.topicMatch = newTopicMatching()
	c.known = make(map[string]int32)
	for _, t := range restored.Snapshot.Topics {
		c.known[t.Topic] = t.Partitions
	}
	if err := c.openBroker(o); err != nil {
		return err
	}
	c.ln = o.listener
	if c.ln == nil && !c.embedded {
		if c.ln, err = net.Listen("tcp", c.cfg.Listen); err != nil {
			return fmt.Errorf("coordinator: listen: %w", err)
		}
	}
	if c.cfg.TLS.Enabled() && !c.embedded {
		if c.tls, err = tlsconf.NewServer(c.cfg.TLS.ServerConfig, c.log.Named("tls")); err != nil {
			return fmt.Errorf("coordinator: %w", err)
		}
	}
	c.metrics = newMetrics(c)
	c.authFailures.register(c.metrics.registry)
	c.share.register(c.metrics.registry)
	c.topicMatch.register(c.metrics.registry)
	c.registerAnswers(c.metrics.registry)
	c.offsets = newOffsetResolver(c.broker, c.cfg.OffsetCacheTTL, c.cfg.BrokerTimeout)
	c.mirror = newMirror()
	c.timeline = timeline.New(c.cfg.Console.TimelineEvents, c.cfg.Console.MaxSubscribers)
	c.loop = newLoop(c, driver.New(machine, timedStore{c: c, b: c.store}, newObserver(c), restored))
	c.routes = c.newRouter()
	if c.console, err = c.newConsole(); err != nil {
		return err
	}
	c.server = c.newServer()
	c.log.Info("coordinator restored",
		zap.String("data_dir", c.cfg.DataDir), zap.Uint64("sync_seq", snap.Seq),
		zap.Int("groups", len(snap.Groups)), zap.String("signing_key", c.keys.current()))
	return nil
}

func (c *Coordinator) openBroker(o options) error {
	if o.broker != nil {
		c.broker = o.broker
		return nil
	}
	client, err := broker.New(c.cfg.Broker, c.log)
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	c.owned, c.broker = client, client
	return nil
}

// release frees what open acquired, for a coordinator that never ran.
func (c *Coordinator) release() {
	if c.ln != nil {
		c.ln.Close()
	}
	if c.owned != nil {
		c.owned.Close()
	}
	if c.store != nil {
		if err := c.store.Close(); err != nil {
			c.log.Error("close store", zap.Error(err))
		}
	}
}

// Addr is the address the HTTP server listens on.
func (c *Coordinator) Addr() net.Addr { return c.ln.Addr() }

// URL is the base URL of the listener: https:// when TLS is on.
func (c *Coordinator) URL() string {
	if c.tls != nil {
		return "https://" + c.Addr().String()
	}
	return "http://" + c.Addr().String()
}

// listener is what the HTTP server accepts on: c.ln, its accepts
// guarded (listener.go), wrapped in TLS
// when it is configured, its request heads watched (internal/crlf).
func (c *Coordinator) listener() net.Listener {
	ln := net.Listener(guardListener(c.ln, c.cfg, c.proxies, c.tls != nil, c.log.Named("http"), c.metrics.registry)) // listener.go
	if c.tls != nil {
		return crlf.Listener(c.tls.HTTPListener(ln)) // a plaintext request is answered 400 (tlsconf/plaintext.go)
	}
	return crlf.Listener(ln)
}

// Run serves until ctx is done or Close is called, then shuts down
// gracefully: it stops accepting, answers held polls, and closes the
// store. It returns the error that stopped the event loop, if any. A
// failed persist or safety audit stops the loop but not the server: the
// coordinator fails closed (every request 503, /healthz and /readyz
// report why) until it is stopped.
func (c *Coordinator) Run(ctx context.Context) error {
	if !c.started() {
		return errors.New("coordinator: Run called twice")
	}
	defer close(c.ran)
	go c.loop.run()
	bg, stopBackground := context.WithCancel(context.Background())
	var background sync.WaitGroup
	c.refreshTopics(bg)
	background.Add(3)
	go func() { defer background.Done(); c.pollTopics(bg) }()
	go func() { defer background.Done(); c.topicMatch.run(bg, c) }()
	go func() { defer background.Done(); c.mirror.run(bg, c) }()
	serveErr := make(chan error, 1)
	if !c.embedded {
		go func() { serveErr <- c.server.Serve(c.listener()) }()
		c.log.Info("coordinator serving", zap.String("url", c.URL()))
	}

	var err error
	select {
	case <-ctx.Done():
	case <-c.closing:
	case err = <-serveErr:
		err = fmt.Errorf("coordinator: serve: %w", err)
	}
	c.shutdown()
	stopBackground()
	background.Wait()
	if loopErr := c.loop.failure(); loopErr != nil {
		err = loopErr
	}
	if closeErr := c.closeResources(); err == nil {
		err = closeErr
	}
	return err
}

// shutdown stops accepting connections, stops the loop (which answers
// every held request), then waits for open requests to finish.
func (c *Coordinator) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ShutdownTimeout)
	defer cancel()
	c.console.Close() // ends live streams, which the server would wait for
	served := make(chan error, 1)
	if c.embedded {
		served <- nil // the replica's server carries the requests
	} else {
		go func() { served <- c.server.ShutdownWithContext(ctx) }()
	}
	c.loop.stopAndWait()
	if err := <-served; err != nil {
		c.log.Warn("http shutdown", zap.Error(err))
	}
}

func (c *Coordinator) closeResources() error {
	if c.owned != nil {
		c.owned.Close()
	}
	if err := c.store.Close(); err != nil {
		return fmt.Errorf("coordinator: close store: %w", err)
	}
	return nil
}

// Close stops a running coordinator and waits for Run to return; on one
// that never ran it releases the store, broker and listener.
func (c *Coordinator) Close() error {
	c.close(c.release)
	return nil
}
