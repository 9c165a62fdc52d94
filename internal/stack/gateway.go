package stack

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/gateway"
)

// Gateway is one gateway of a stack: in this process (gateway.New) or a
// `capgate gateway` process. Its id, address and URL stay the same across
// Kill and Start. Safe for concurrent use.
type Gateway struct {
	s       *Stack
	Index   int
	ID      string // "gateway-1", …
	Addr    string // host:port
	URL     string // scheme://Addr
	process bool
	dir     string

	mu             sync.Mutex
	coordinatorURL string // where it syncs (the coordinator, or a proxy)
	in             *gateway.Gateway
	proc           *Process
	ran            bool // started in this process before: a restart
}

func (s *Stack) newGateway(i int) (*Gateway, error) {
	id := fmt.Sprintf("gateway-%d", i+1)
	listen := ""
	if i < len(s.opts.GatewayListen) {
		listen = s.opts.GatewayListen[i]
	}
	addr, err := FreeAddr(listen)
	if err != nil {
		return nil, err
	}
	return &Gateway{s: s, Index: i, ID: id, Addr: addr, URL: s.opts.scheme() + "://" + addr,
		process: s.opts.GatewayProcesses, dir: s.opts.Dir, coordinatorURL: s.syncURL()}, nil
}

// Config is the configuration the gateway runs with: the defaults, agreeing
// with the coordinator on sync timing (issuer, audience, leeway and lease
// the gateway learns from the coordinator), the stack's broker and timing,
// then Options.Gateway.
func (g *Gateway) Config() gateway.Config {
	s := g.s
	cc := s.Coordinator().Config()
	cfg := gateway.DefaultConfig()
	cfg.ID, cfg.Listen = g.ID, g.Addr
	g.mu.Lock()
	cfg.CoordinatorURL = g.coordinatorURL
	g.mu.Unlock()
	cfg.SyncToken = gateway.Secret(s.SyncToken)
	cfg.SyncWait = min(cfg.SyncWait, cc.Groups.SyncWaitMax)
	// fasthttp closes a connection that never sent a request only 5 s
	// after accepting it; an HTTP client's spare connection is one (the
	// SDK's fetches ahead make them likelier). Shutdown must outlast that.
	cfg.ShutdownTimeout = 10 * time.Second
	cfg.Broker = s.BrokerConfig()
	s.opts.Timing.applyGateway(&cfg)
	if s.opts.Gateway != nil {
		s.opts.Gateway(g.Index, &cfg)
	}
	return cfg
}

// SetCoordinatorURL points the gateway's sync channel elsewhere (a proxy
// in front of the coordinator) from its next Start on.
func (g *Gateway) SetCoordinatorURL(url string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.coordinatorURL = url
}

// CheckSyncTimings is DESIGN §4's rule for a gateway to count as safe once
// silent: it refuses fetches after sync_timeout without a sync, which must
// come before the coordinator gives up on it (gateway_timeout) even with
// the clocks max_clock_skew apart (the gateway also refuses readiness
// otherwise); a held sync poll must be answered before the gateway's
// sync_timeout.
func CheckSyncTimings(cc coordinator.Config, gc gateway.Config) error {
	g := cc.Groups
	switch {
	case gc.SyncTimeout >= g.GatewayTimeout-g.MaxClockSkew:
		return fmt.Errorf("gateway.sync_timeout: must be < coordinator.groups.gateway_timeout - max_clock_skew (%s), got %s", g.GatewayTimeout-g.MaxClockSkew, gc.SyncTimeout)
	case gc.SyncWait > g.SyncWaitMax:
		return fmt.Errorf("gateway.sync_wait: must be <= coordinator.groups.sync_wait_max (%s), got %s", g.SyncWaitMax, gc.SyncWait)
	case g.SyncWaitMax >= gc.SyncTimeout:
		return fmt.Errorf("coordinator.groups.sync_wait_max: must be < gateway.sync_timeout (%s), got %s", gc.SyncTimeout, g.SyncWaitMax)
	}
	return nil
}

// Start starts the gateway (again, after Kill or Stop); it does not wait
// for readiness (WaitReady): a fresh gateway refuses with 503 until its
// first sync.
func (g *Gateway) Start(ctx context.Context) error {
	cfg := g.Config()
	if err := CheckSyncTimings(g.s.Coordinator().Config(), cfg); err != nil {
		return fmt.Errorf("stack: %s: %w", g.ID, err)
	}
	if g.process {
		return g.startProcess(cfg)
	}
	in, err := g.startInProcess(ctx, cfg)
	if err != nil {
		return fmt.Errorf("stack: %s: %w", g.ID, err)
	}
	g.mu.Lock()
	g.in, g.ran = in, true
	g.mu.Unlock()
	return nil
}

// startInProcess builds and starts an in-process gateway. A gateway.Gateway
// starts once (a second Start only says "already started"), so each
// attempt is a fresh one and a failed one is closed. Only a restart
// retries, and only an address in use: our own old listener may linger a
// moment after a Close. On a first start the address is someone else's
// (another capgate dev): that error is returned at once, as it is.
func (g *Gateway) startInProcess(ctx context.Context, cfg gateway.Config) (*gateway.Gateway, error) {
	g.mu.Lock()
	restart := g.ran
	g.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		in, err := gateway.New(cfg, g.s.logger(g.ID))
		if err != nil {
			return nil, err
		}
		if err = in.Start(); err == nil {
			return in, nil
		}
		_ = in.CloseWithoutLeaving() // it never synced: nothing to leave
		retry := restart && errors.Is(err, syscall.EADDRINUSE) && time.Now().Before(deadline) && ctx.Err() == nil
		if !retry {
			return nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (g *Gateway) startProcess(cfg gateway.Config) error {
	if g.s.opts.Binary == "" {
		return errors.New("stack: GatewayProcesses needs Options.Binary")
	}
	// The sync token travels in the environment: the config file's Secret
	// is written redacted.
	proc, err := Launch{Name: g.ID, Bin: g.s.opts.Binary, Dir: g.dir, Section: "gateway", Settings: cfg,
		Env: []string{"CAPGATE_GATEWAY_SYNC_TOKEN=" + g.s.SyncToken}, OnLine: g.s.lineSink(g.ID)}.Start()
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.proc = proc
	g.mu.Unlock()
	return nil
}

// WaitReady waits until GET /readyz answers 200, or fails early when the
// gateway's process exited.
func (g *Gateway) WaitReady(ctx context.Context) error {
	if p := g.Process(); p != nil {
		return p.WaitHTTP(ctx, g.s.http, g.URL+"/readyz")
	}
	return WaitOK(ctx, g.s.http, g.URL+"/readyz", nil, nil)
}

// Ready is the status of GET /readyz (0 with the error when unreachable).
func (g *Gateway) Ready(ctx context.Context) (int, error) { return g.s.get(ctx, g.URL+"/readyz") }

// Kill stops the gateway at once: SIGKILL for a process, Close for one
// in this process (fetches in flight answer 503) without telling the
// coordinator it left, as a crash would not.
func (g *Gateway) Kill() {
	g.s.http.CloseIdleConnections()
	g.mu.Lock()
	in, proc := g.in, g.proc
	g.in, g.proc = nil, nil
	g.mu.Unlock()
	if in != nil {
		_ = in.CloseWithoutLeaving()
	}
	if proc != nil && !proc.Exited() {
		proc.Kill()
	}
}

// Stop shuts the gateway down gracefully (SIGTERM for a process).
func (g *Gateway) Stop() error {
	g.s.http.CloseIdleConnections()
	g.mu.Lock()
	in, proc := g.in, g.proc
	g.in, g.proc = nil, nil
	g.mu.Unlock()
	var err error
	if in != nil {
		err = in.Close()
	}
	if proc != nil {
		err = proc.Terminate(10 * time.Second)
	}
	if err != nil {
		return fmt.Errorf("stack: %s: %w", g.ID, err)
	}
	return nil
}

// Signal sends sig to the gateway's process (SIGSTOP, SIGCONT).
func (g *Gateway) Signal(sig syscall.Signal) error {
	p := g.Process()
	if p == nil {
		return fmt.Errorf("stack: %s: signals need a gateway process", g.ID)
	}
	return p.Signal(sig)
}

// InProcess is the running in-process gateway (nil for a process or when
// stopped).
func (g *Gateway) InProcess() *gateway.Gateway {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.in
}

// Process is the gateway's process (nil in-process or when stopped).
func (g *Gateway) Process() *Process {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.proc
}
