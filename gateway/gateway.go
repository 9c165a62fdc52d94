package gateway

import (
	"context"
	"errors"
	"fmt"
	"github.com/capgate/capgate/internal/failguard"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/gateway/guard"
	"github.com/capgate/capgate/gateway/kafkaproto"
	"github.com/capgate/capgate/internal/bodyheld"
	"github.com/capgate/capgate/internal/clientaddr"
	"github.com/capgate/capgate/internal/connguard"
	"github.com/capgate/capgate/internal/coordinators"
	"github.com/capgate/capgate/internal/crlf"
	"github.com/capgate/capgate/internal/probe"
	"github.com/capgate/capgate/internal/quietio"
	"github.com/capgate/capgate/internal/refusallog"
	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/tlsconf"
)

// Gateway is one gateway process: HTTP server, sync client, broker client.
type Gateway struct {
	cfg Config
	// sync is who this process is on the sync channel (sync_instance.go).
	sync   *syncIdentity
	log    *zap.Logger
	trace  *zap.Logger // per-capability debug lines, whatever log's level
	broker *broker.Client
	// verifier checks tokens under the coordinator's settings, learned on
	// the first sync reset (nil before: the gateway is not ready then).
	verifier atomic.Pointer[ocap.Verifier]
	cache    *ocap.Cache
	// credentials caches client credentials that verified (VerifyClient),
	// apart from cache so that none ever reaches a capability's routes.
	credentials *ocap.Cache
	view        *authz.View
	limiter     *rateLimiter
	// authFailures budgets failed verifications per client address
	// (auth_failures_per_second; verifyCapability).
	authFailures *failguard.Guard
	proxies      clientaddr.Proxies // trusted_proxies: whose X-Forwarded-For names the client
	inflight     *inflight
	held         *heldBytes      // answer bytes on their way to clients
	bodies       *bodyheld.Holds // request bodies being read (bodyheld.go)
	// kafkaAtHTTP logs Kafka clients at the HTTP port (preauth.go),
	// rate-limited.
	kafkaAtHTTP *refusallog.Log
	// syncFailures bounds the "sync failed" warnings of an outage
	// (syncLoop).
	syncFailures *refusallog.Log
	kafkaUp      probe.Kafka // Kafka reachability for /readyz (health.go)
	metrics      *metrics
	server       *fasthttp.Server
	routes       []route
	tls          *tlsconf.Server // nil: plaintext
	pprof        *http.Server    // nil unless pprof_listen is set
	pprofAddr    string          // where it listens (PprofAddr)
	syncHTTP     *http.Client
	// coordinators is the sync channel's coordinator URLs and the one in
	// use: owned by the sync loop, then by Close.
	coordinators *coordinators.List
	noLeave      atomic.Bool        // CloseWithoutLeaving
	kafka        *kafkaproto.Server // nil unless kafka_listen is set

	// follower is the sync client's state (guard.Follower): owned by the
	// sync loop, its Refusal read by every request.
	follower *guard.Follower
	settings *guard.Settings // the ones verifier was built for (sync loop only)
	ackedSeq atomic.Uint64   // the after of the last poll sent

	stopSync context.CancelFunc
	syncDone chan struct{}

	ln        net.Listener
	serveDone chan error
	startOnce sync.Once
	closeOnce sync.Once

	// afterFetch, when set by tests, runs after the broker answered a
	// fetch and before the fetch is checked again.
	afterFetch func()
	// afterProduce, when set by tests, runs after Kafka answered a
	// produce, while it is still registered in flight.
	afterProduce func()
	// afterVerify, when set by tests, runs after a capability's
	// signature verified and before it is cached (verifyCapability).
	afterVerify func()
}

// errShuttingDown cancels the fetches in flight when the gateway closes.
var errShuttingDown = errors.New("gateway: shutting down")

// New validates cfg and builds a gateway; it neither listens nor syncs
// until Start.
func New(cfg Config, log *zap.Logger) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.SyncToken == "" && cfg.CoordinatorTLS.CertFile == "" {
		// Nothing to authenticate the sync channel with: the gateway would
		// start, never sync, and answer every fetch 503 not_ready. (The
		// defaults validate; a gateway that runs needs one of the two.)
		return nil, errors.New("gateway.sync_token: required (the coordinator's sync token, also CAPGATE_GATEWAY_SYNC_TOKEN), unless coordinator_tls.cert_file presents a certificate to a coordinator whose tls.sync auth is certificate")
	}
	proxies, err := clientaddr.Parse("gateway.trusted_proxies", cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	bc, err := broker.New(cfg.Broker, log.Named("broker"))
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	syncTLS, err := cfg.CoordinatorTLS.Client(log.Named("tls")) // the CA bundle followed on disk
	if err != nil {
		bc.Close()
		return nil, fmt.Errorf("gateway: coordinator_tls: %w", err)
	}
	var serverTLS *tlsconf.Server
	if cfg.TLS.Enabled() {
		if serverTLS, err = tlsconf.NewServer(cfg.TLS.ServerConfig, log.Named("tls")); err != nil {
			bc.Close()
			return nil, fmt.Errorf("gateway: %w", err)
		}
	}
	g := &Gateway{
		cfg:    cfg,
		sync:   newSyncIdentity(cfg.GatewayID()),
		log:    log,
		trace:  forceDebug(log.Named("trace")),
		broker: bc,
		// The cache keeps entries for the longest leeway any coordinator
		// may use; Decide checks expiry with the learned one on every use.
		cache:        ocap.NewCache(cfg.TokenCacheEntries, ocap.MaxLeeway),
		credentials:  ocap.NewCache(credentialCacheEntries, ocap.MaxLeeway),
		view:         authz.NewView(authz.Config{}),
		limiter:      newRateLimiter(cfg.RateLimitEntries),
		authFailures: newAuthGuard(cfg),
		proxies:      proxies,
		inflight:     newInflight(guard.Bugs{}, cfg.MaxInflightFetches, cfg.MaxInflightFetchesPerHolder, cfg.inflightPerTenant()),
		held:         newHeldBytes(cfg.MaxAnswerBytesHeld, cfg.MaxAnswerBytesHeldPerHolder),
		bodies:       bodyheld.New(cfg.MaxBodyBytesHeld, cfg.MaxBodyBytesHeldPerHolder, cfg.ReadTimeout+time.Second),
		kafkaAtHTTP:  refusallog.New(log.Named("http")),
		syncFailures: refusallog.NewBounded(log, zapcore.WarnLevel, syncFailLinesPerSecond, syncFailBurst),
		tls:          serverTLS,
		syncHTTP:     &http.Client{Transport: syncTransport(cfg, syncTLS)},
		syncDone:     make(chan struct{}),
		serveDone:    make(chan error, 1),
	}
	if g.coordinators, err = coordinators.New(coordinators.Split(cfg.CoordinatorURL)); err != nil {
		bc.Close()
		return nil, fmt.Errorf("gateway: coordinator_url: %w", err)
	}
	g.follower = guard.NewFollower(guard.SyncConfig{Timeout: cfg.SyncTimeout, BackoffMin: syncBackoffMin, BackoffMax: syncBackoffMax}, g.view)
	g.metrics = newMetrics(g)
	g.routes = g.newRoutes()
	g.server = g.newServer()
	if cfg.KafkaListen != "" {
		kc := cfg.kafkaConfig()
		kc.ShutdownTimeout = membersLeaveTimeout(cfg.ShutdownTimeout) // the rest of the grace is the gateway's leave
		kc.ClusterID = g.audience
		kc.InternalTopic = g.internalTopic
		kc.CoordinatorTLS = syncTLS
		if serverTLS != nil {
			kc.WrapListener = serverTLS.Listener // the same certificate and client-certificate rule
		}
		if g.kafka, err = kafkaproto.New(kc, kafkaGate{g}, nil, log.Named("kafka")); err != nil {
			bc.Close()
			return nil, fmt.Errorf("gateway: %w", err)
		}
		g.registerKafkaMetrics()
	}
	return g, nil
}

func (g *Gateway) newServer() *fasthttp.Server {
	return &fasthttp.Server{
		Handler:                      g.serve,            // Accept negotiation, then the router (accept.go)
		ErrorHandler:                 g.answerUnreadable, // a head internal/crlf refused, then handleServerError (preauth.go)
		HeaderReceived:               g.requestConfig,    // body caps before the body is read (preauth.go)
		Name:                         "capgate-gateway",
		ReadTimeout:                  g.cfg.ReadTimeout,
		WriteTimeout:                 g.cfg.WriteTimeout,
		IdleTimeout:                  g.cfg.IdleTimeout,
		ReadBufferSize:               g.cfg.MaxHeaderBytes,
		MaxRequestBodySize:           g.cfg.MaxBodyBytes,
		Concurrency:                  connguard.Concurrency(g.cfg.MaxConnections), // bounded below by the listener (listener.go)
		ConnState:                    connguard.ConnState,                         // idle connections marked: they give way under pressure
		ExpectHandler:                g.expectContinue,                            // 100 Continue only within the body cap (expect.go)
		DisablePreParseMultipartForm: true,
		CloseOnShutdown:              true,
		SecureErrorLogMessage:        true, // error logs must never echo headers (tokens)
		Logger:                       fasthttpLogger{g.log.Named("http")},
	}
}

// Start listens on cfg.Listen, serves, and starts the sync client.
func (g *Gateway) Start() error { return g.StartOn(nil) }

// StartOn is Start serving on ln, already listening (nil: listen on
// cfg.Listen). A caller that must know the address before the gateway
// starts (internal/stack: a part keeps its address across restarts)
// listens on port 0 itself and hands the listener over — never a port
// found free and closed, which another process can take before the
// gateway binds it. The gateway closes ln, also when it fails to start.
func (g *Gateway) StartOn(ln net.Listener) error {
	err := errors.New("gateway: already started")
	started := false
	g.startOnce.Do(func() {
		started = true
		if ln == nil {
			ln, err = net.Listen("tcp", g.cfg.Listen)
			if err != nil {
				err = fmt.Errorf("gateway: listen: %w", err)
				return
			}
		}
		if err = g.startPprof(); err != nil {
			_ = ln.Close()
			return
		}
		if g.kafka != nil {
			if err = g.kafka.Start(); err != nil {
				ln.Close()
				g.stopPprof()
				return
			}
		}
		g.ln = ln
		ln = quietio.Listener(ln) // raw socket calls: no monitor-thread wake per request (internal/quietio)
		ln = g.guardListener(ln)  // accept errors retried, connections bounded (listener.go)
		if g.tls != nil {
			ln = g.tls.HTTPListener(ln) // a plaintext request is answered 400 (tlsconf/plaintext.go)
		}
		go func() { g.serveDone <- g.server.Serve(crlf.Listener(ln)) }() // request heads watched (internal/crlf)
		syncCtx, stop := context.WithCancel(context.Background())
		g.stopSync = stop
		go g.syncLoop(syncCtx)
		g.log.Info("gateway started", zap.String("url", g.URL()), zap.Object("config", g.cfg))
	})
	if !started && ln != nil {
		_ = ln.Close()
	}
	return err
}

// Addr is the address the gateway listens on (after Start).
func (g *Gateway) Addr() string {
	if g.ln == nil {
		return ""
	}
	return g.ln.Addr().String()
}

// URL is the gateway's base URL (after Start): https:// when TLS is on.
func (g *Gateway) URL() string {
	if g.tls != nil {
		return "https://" + g.Addr()
	}
	return "http://" + g.Addr()
}

// KafkaAddr is the address the Kafka listener is bound to ("" when off).
func (g *Gateway) KafkaAddr() string {
	if g.kafka == nil {
		return ""
	}
	return g.kafka.Addr()
}

// Run starts the gateway and closes it when ctx is done.
func (g *Gateway) Run(ctx context.Context) error {
	if err := g.Start(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return g.Close()
	case err := <-g.serveDone:
		return errors.Join(fmt.Errorf("gateway: serve: %w", err), g.Close())
	}
}

// Close shuts the gateway down gracefully within shutdown_timeout,
// counted from the call (an orchestrator kills the process at its grace
// period: Kubernetes' terminationGracePeriodSeconds). It ends the long
// polls in flight (they answer 503, retriable), then at the same time
// closes the Kafka listener (its members release and leave, given
// membersShare of the grace) and shuts the HTTP server down (stop
// accepting, every handler answers); once both are done it stops syncing
// and tells the coordinator it left (only once nothing is served any
// more), with what is left of the grace; then it closes the broker
// client. What the deadline cuts off is logged and returned.
func (g *Gateway) Close() error {
	var err error
	g.closeOnce.Do(func() { err = g.shutdown() })
	if err != nil {
		return fmt.Errorf("gateway: shutdown: %w", err)
	}
	return nil
}

// membersShare is the part of shutdown_timeout the Kafka listener's
// members get to release their partitions and leave their groups
// (kafkaproto.Config.ShutdownTimeout); the rest is kept for the
// gateway's own leave, which must wait for the listener to be closed.
const membersShare = 3 // quarters

// membersLeaveTimeout is membersShare quarters of shutdown.
func membersLeaveTimeout(shutdown time.Duration) time.Duration {
	return shutdown / 4 * membersShare
}

// shutdown is Close's work under one deadline. Order, and why: the
// fetches in flight are cancelled first, so a long poll answers at once;
// the Kafka listener and the HTTP server then close side by side (they
// share nothing but the broker client); the sync loop stops and the
// gateway leaves the coordinator only after both, because a leave tells
// the coordinator this gateway serves nothing any more (its handoffs
// stop waiting for its acks); the broker client closes last, after
// every fetch and produce that used it.
func (g *Gateway) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.ShutdownTimeout)
	defer cancel()
	g.inflight.shutdown(errShuttingDown)
	kafkaDone := g.closeKafka()
	var err error
	if g.ln != nil {
		if err = g.server.ShutdownWithContext(ctx); err != nil {
			g.log.Warn("shutdown_timeout cut the HTTP server off: handlers still running", zap.Int32("open_connections", g.server.GetOpenConnectionsCount()), zap.Error(err))
			err = fmt.Errorf("http server: %w", err)
		}
	}
	err = errors.Join(err, g.awaitKafka(ctx, kafkaDone))
	if g.ln != nil {
		g.stopSync()
		select {
		case <-g.syncDone:
		case <-ctx.Done():
			g.log.Warn("shutdown_timeout cut the sync loop off")
			err = errors.Join(err, errors.New("sync loop: still running at shutdown_timeout"))
		}
		g.leaveCoordinator(ctx, err)
	}
	g.stopPprof()
	g.broker.Close()
	g.syncHTTP.CloseIdleConnections()
	g.log.Info("gateway stopped")
	return err
}

// closeKafka closes the Kafka listener in a goroutine of its own (its
// members leave their groups meanwhile); the channel is closed when it is
// done.
func (g *Gateway) closeKafka() <-chan struct{} {
	done := make(chan struct{})
	if g.kafka == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		_ = g.kafka.Close()
	}()
	return done
}

// awaitKafka waits for the Kafka listener's close up to ctx's deadline.
func (g *Gateway) awaitKafka(ctx context.Context, done <-chan struct{}) error {
	if g.kafka == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		g.log.Warn("shutdown_timeout cut the Kafka listener off: still closing; members not gone are expired by the coordinator", zap.Int("members", g.kafka.Members()))
		return errors.New("kafka listener: still closing at shutdown_timeout")
	}
}

// CloseWithoutLeaving closes the gateway like Close but does not tell the
// coordinator it left, as a crash would not: the coordinator waits for
// its silence (tests of crashes, in one process).
func (g *Gateway) CloseWithoutLeaving() error {
	g.noLeave.Store(true)
	return g.Close()
}

// leaveCoordinator tells the coordinator the gateway is gone, within
// ctx's deadline, unless the gateway did not stop cleanly (shutdownErr: a
// handler or a Kafka connection may still be serving, so the coordinator
// must keep waiting for the gateway's silence).
func (g *Gateway) leaveCoordinator(ctx context.Context, shutdownErr error) {
	if g.noLeave.Load() {
		return
	}
	if shutdownErr != nil {
		g.log.Warn("not leaving the coordinator: the gateway did not stop cleanly; it counts this gateway safe after gateway_timeout", zap.Error(shutdownErr))
		return
	}
	deadline, _ := ctx.Deadline()
	left := time.Until(deadline)
	if left <= 0 {
		g.log.Warn("shutdown_timeout cut leaving the coordinator off: no time left; it counts this gateway safe after gateway_timeout")
		return
	}
	if err := g.leave(left); err != nil {
		g.log.Warn("leaving the coordinator failed; it counts this gateway safe after gateway_timeout", zap.Error(err), zap.Bool("cut_off_by_shutdown_timeout", time.Until(deadline) <= 0))
		return
	}
	g.log.Info("left the coordinator", zap.String("coordinator", g.coordinators.Current()))
}

// fasthttpLogger sends fasthttp's own messages to zap at debug: they are
// about misbehaving clients, which the metrics count.
type fasthttpLogger struct{ log *zap.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	if ce := l.log.Check(zap.DebugLevel, ""); ce != nil {
		ce.Message = fmt.Sprintf(format, args...)
		ce.Write()
	}
}

// syncTransport is the sync client's: two idle connections, kept up to
// two sync timeouts, each new one verified against the CA bundle as it
// is on disk then (tlsconf.Client).
func syncTransport(cfg Config, tc *tlsconf.Client) *http.Transport {
	t := &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: 2 * cfg.SyncTimeout}
	tc.Apply(t)
	return t
}
