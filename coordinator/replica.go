package coordinator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/coordinator/leader"
	"github.com/capgate/capgate/internal/clientaddr"
	"github.com/capgate/capgate/internal/crlf"
	"github.com/capgate/capgate/internal/scrape"
	"github.com/capgate/capgate/store"
	"github.com/capgate/capgate/tlsconf"
)

// Replica is one coordinator replica on the Kafka-log state (DESIGN §9):
// it owns the listener, tails the shard's log with a warm follower, and
// lets the pure leadership decision (coordinator/leader) say when to take
// over. While it leads, a Coordinator built on the promoted log serves
// every request through the replica's listener; otherwise every consumer,
// sync and admin call gets 421 not_leader naming the leader
// (replica_http.go). Its methods are safe for concurrent use.
//
// The takeover sequence: fence the shard's transactional id
// (InitProducerID), commit a barrier, read the log to the barrier, then
// restore the machine from the follower's warm state (no log replay
// beyond the tail) and serve. Members, grants, epochs, offsets, leases,
// denials and QoS all come from the log, and the restore gives every
// member session_timeout to heartbeat again, so members continue without
// rejoining. A leader whose write (a beat or a Ready) fails — fenced by a
// newer leader, or broken — sends nothing of it, stops serving at once
// (not_leader from then on) and follows the log again.
type Replica struct {
	cfg  Config
	log  *zap.Logger
	now  func() time.Time
	opts []Option // for the Coordinator of each leadership
	url  string

	ln      net.Listener
	tls     *tlsconf.Server
	server  *fasthttp.Server
	metrics *replicaMetrics
	scrape  *scrape.Answer // GET /metrics (serveMetrics)

	// startCheck: Run reads the log to its end first and refuses to
	// start if this replica could never take it over (off only in tests
	// of what a replica finds while following).
	startCheck bool

	view     atomic.Pointer[replicaView]
	follower atomic.Pointer[store.Follower] // while following: JWKS, readiness
	// unreachable: why the last attempt to follow the log failed (nil
	// once one succeeded), for /readyz while the log cannot be read.
	unreachable atomic.Pointer[error]

	lifecycle
}

// replicaView is what the HTTP side answers with: the role, whom to name,
// why this replica can never take over (unfit), and the Coordinator
// serving while this replica leads.
type replicaView struct {
	role   leader.Role
	hint   leader.Hint
	reason string
	unfit  string
	since  time.Time // when the role last changed (/readyz says how long ago)
	// stepDown: when this replica last stepped down and why ("" if it
	// never did), kept through the roles that follow: a follower's
	// /readyz still says it (the reason is public: publicLoopError).
	stepDown string
	active   *Coordinator  // nil unless leading and serving
	next     chan struct{} // closed when the view is replaced
}

// NewReplica prepares a replica of a state: kafka coordinator: it listens at once (not_leader until it leads); Run
// follows the log and takes part in leadership.
func NewReplica(cfg Config, log *zap.Logger, opts ...Option) (*Replica, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("coordinator: config: %w", err)
	}
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	if cfg.State != StateKafka {
		return nil, errors.New("coordinator: replicas need state: kafka")
	}
	if log == nil {
		log = zap.NewNop()
	}
	log = log.With(zap.String("replica", cfg.replicaID()))
	r := &Replica{
		cfg: cfg, log: log, now: o.now, url: cfg.advertise(),
		lifecycle: newLifecycle(), startCheck: true,
	}
	// The leader's Coordinator serves through this listener and signs
	// as cfg.ID; the options that built the replica carry over.
	r.opts = append(append([]Option(nil), opts...), func(o *options) { o.embedded, o.listener = true, nil })
	r.ln = o.listener
	if r.ln == nil {
		var err error
		if r.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, fmt.Errorf("coordinator: listen: %w", err)
		}
	}
	if cfg.TLS.Enabled() {
		var err error
		if r.tls, err = tlsconf.NewServer(cfg.TLS.ServerConfig, log.Named("tls")); err != nil {
			r.ln.Close()
			return nil, fmt.Errorf("coordinator: %w", err)
		}
	}
	if cfg.Replica.Advertise == "" && o.listener != nil {
		r.url = r.URL() // the listener's real port (tests listen on :0)
	}
	r.metrics = newReplicaMetrics(r.tls) // the process's metrics too, leading or not
	r.scrape = scrape.New(r.gatherers)
	r.server = newHTTPServer(cfg, log, r.serve, r.serveError)
	r.server.HeaderReceived = r.requestConfig // body caps before authentication (server.go)
	// 100 Continue only within the cap (listener.go)
	r.server.ExpectHandler = func(ctx *fasthttp.RequestCtx) int {
		return expectContinue(ctx, cfg, func(h *fasthttp.RequestHeader) int { return r.requestConfig(h).MaxRequestBodySize }, r.serveError)
	}
	r.view.Store(&replicaView{role: leader.Follower, reason: "starting", since: r.now(), next: make(chan struct{})})
	return r, nil
}

// Addr is the address the replica listens on.
func (r *Replica) Addr() net.Addr { return r.ln.Addr() }

// URL is the base URL of the listener (https:// with TLS).
func (r *Replica) URL() string {
	if r.tls != nil {
		return "https://" + r.Addr().String()
	}
	return "http://" + r.Addr().String()
}

// ID is the replica's name in the log.
func (r *Replica) ID() string { return r.cfg.replicaID() }

// Role is the replica's role now, and the leader it would name.
func (r *Replica) Role() (leader.Role, leader.Hint) {
	v := r.view.Load()
	return v.role, v.hint
}

// Leading is the Coordinator serving while this replica leads, or nil.
func (r *Replica) Leading() *Coordinator { return r.view.Load().active }

// Run serves and takes part in leadership until ctx is done or Close is
// called, then stops leading (if it did) and shuts the listener down. It
// returns an error wrapping store.ErrIncompatible at once when the log,
// read to its end at start, shows this replica could never take over:
// another coordinator id, cluster, KEK or transactional id prefix than
// the replicas that wrote it (it refuses to start).
func (r *Replica) Run(ctx context.Context) error {
	if !r.started() {
		return errors.New("coordinator: replica: Run called twice")
	}
	defer close(r.ran)
	// Accepts guarded (listener.go); trusted_proxies was validated with the config.
	proxies, _ := clientaddr.Parse("trusted_proxies", r.cfg.TrustedProxies)
	ln := net.Listener(guardListener(r.ln, r.cfg, proxies, r.tls != nil, r.log.Named("http"), r.metrics.registry))
	if r.tls != nil {
		ln = r.tls.HTTPListener(ln) // a plaintext request is answered 400 (tlsconf/plaintext.go)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- r.server.Serve(crlf.Listener(ln)) }() // request heads watched (internal/crlf)
	r.log.Info("coordinator replica serving", zap.String("url", r.URL()), zap.String("advertise", r.url))
	ctx, cancel := context.WithCancel(ctx)
	elected := make(chan error, 1)
	go func() { elected <- r.elect(ctx) }()
	var err error
	refused := false
	select {
	case <-ctx.Done():
	case <-r.closing:
	case err = <-serveErr:
		err = fmt.Errorf("coordinator: serve: %w", err)
	case err = <-elected: // refused at start: it could never take over
		refused = true
	}
	stopping := time.Now()
	role, _ := r.Role()
	if err == nil {
		r.log.Info("coordinator replica shutting down", zap.Stringer("role", role), zap.Duration("shutdown_timeout", r.cfg.ShutdownTimeout))
	}
	shutdown, done := context.WithTimeout(context.Background(), r.cfg.ShutdownTimeout)
	defer done()
	cancel()
	if !refused {
		<-elected // stopped leading: the Coordinator closed its log
	}
	if serr := r.server.ShutdownWithContext(shutdown); serr != nil {
		r.log.Warn("http shutdown", zap.Error(serr))
	}
	if err == nil {
		r.log.Info("coordinator replica stopped", zap.Duration("took", time.Since(stopping)))
	}
	return err
}

// Close stops a running replica and waits for Run to return.
func (r *Replica) Close() error {
	r.close(func() { r.ln.Close() })
	return nil
}

// publish makes v what the HTTP side answers with.
func (r *Replica) publish(v leader.View, active *Coordinator) {
	if !v.Serving {
		active = nil
	}
	prev := r.view.Load()
	if prev.role != v.Role {
		r.log.Info("replica role", zap.Stringer("from", prev.role), zap.Stringer("to", v.Role), zap.String("reason", v.Reason))
		r.metrics.setRole(v.Role)
	}
	if prev.role == v.Role && prev.hint == v.Leader && prev.active == active && prev.reason == v.Reason && prev.unfit == v.Unfit {
		return
	}
	since, stepDown := prev.since, prev.stepDown
	if prev.role != v.Role || prev.reason != v.Reason {
		since = r.now()
		if v.Role == leader.SteppingDown {
			stepDown = "stepped down at " + since.UTC().Format(time.RFC3339) + ": " + v.Reason
		}
	}
	r.view.Store(&replicaView{role: v.Role, hint: v.Leader, reason: v.Reason, unfit: v.Unfit, since: since, stepDown: stepDown, active: active, next: make(chan struct{})})
	close(prev.next)
}

// Watch returns the role now, the leader it names, and a channel closed
// at the next change of either.
func (r *Replica) Watch() (leader.Role, leader.Hint, <-chan struct{}) {
	v := r.view.Load()
	return v.role, v.hint, v.next
}

// follow opens a follower of the shard, retrying while the log is
// unreachable; nil once ctx is done.
func (r *Replica) follow(ctx context.Context) *store.Follower {
	for {
		f, err := r.openFollower(ctx)
		if err == nil {
			r.unreachable.Store(nil)
			r.follower.Store(f)
			return f
		}
		r.unreachable.Store(&err)
		r.log.Warn("follow the state log", zap.Error(err))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(r.cfg.Replica.LeaseTimeout):
		}
	}
}

func (r *Replica) openFollower(ctx context.Context) (*store.Follower, error) {
	client, err := broker.ClientOpts(r.cfg.Broker, r.log)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	opts, err := r.cfg.KafkaState.Options(client, r.cfg.Cluster, r.ID(), 0, r.log.Named("state"))
	if err != nil {
		return nil, err
	}
	// The issuer every replica signs as: a replica with another one
	// would mint tokens nobody accepts once it took over.
	opts.Settings[store.SettingIssuer] = r.cfg.ID
	opts.AdoptSettings = r.cfg.Replica.AdoptLogSettings
	return store.FollowKafka(ctx, opts)
}
