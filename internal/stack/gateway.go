package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/gateway"
)

// Gateway is one gateway of a stack: in this process (gateway.New) or a
// `capgate gateway` process. Its id, address and URL stay the same across
// Kill and Start (a process's first start may move to another free port
// when its own was taken: ports.go). Safe for concurrent use.
type Gateway struct {
	s     *Stack
	Index int
	ID    string // "gateway-1", …
	partAddr
	process bool
	dir     string

	mu             sync.Mutex
	coordinatorURL string // where it syncs (the coordinator, or a proxy)
	in             *gateway.Gateway
	proc           *Process
}

func (s *Stack) newGateway(i int) (*Gateway, error) {
	id := fmt.Sprintf("gateway-%d", i+1)
	listen := ""
	if i < len(s.opts.GatewayListen) {
		listen = s.opts.GatewayListen[i]
	}
	g := &Gateway{s: s, Index: i, ID: id, process: s.opts.GatewayProcesses, dir: s.opts.Dir, coordinatorURL: s.syncURL()}
	if err := g.partAddr.init(listen, s.opts.scheme(), g.process); err != nil {
		return nil, err
	}
	return g, nil
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
// first sync. A start that failed because its address was in use is
// retried (ports.go): a process's first start on another free port, a
// restart on the same address for up to restartRetry (an in-process
// gateway's old listener may linger a moment after a Close). On a first
// start on an address the caller named, that address is someone else's
// (another capgate dev): the error is returned at once, as it is.
func (g *Gateway) Start(ctx context.Context) error { return startPart(ctx, g, g.ID) }

// start is one attempt of Start, on ln when it is not nil (the
// reservation: an in-process gateway is handed it, a process's is closed
// just before the process starts). A gateway.Gateway starts once, so
// each attempt builds a fresh one and a failed one is closed.
func (g *Gateway) start(ctx context.Context, ln net.Listener) error {
	cfg := g.Config()
	if err := CheckSyncTimings(g.s.Coordinator().Config(), cfg); err != nil {
		if ln != nil {
			ln.Close()
		}
		return fmt.Errorf("stack: %s: %w", g.ID, err)
	}
	if g.process {
		if ln != nil {
			ln.Close()
			onReleased(g.ID, g.Addr)
		}
		return g.startProcess(ctx, cfg)
	}
	in, err := gateway.New(cfg, g.s.logger(g.ID))
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return fmt.Errorf("stack: %s: %w", g.ID, err)
	}
	if err := in.StartOn(ln); err != nil {
		_ = in.CloseWithoutLeaving() // it never synced: nothing to leave
		return fmt.Errorf("stack: %s: %w", g.ID, err)
	}
	g.mu.Lock()
	g.in = in
	g.mu.Unlock()
	return nil
}

func (g *Gateway) startProcess(ctx context.Context, cfg gateway.Config) error {
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
	// Not ready yet, but live once it listens: a process that could not
	// listen is seen here, where Start can try again. Anything else is
	// left to WaitReady to report, as before.
	if err := proc.WaitHTTP(ctx, g.s.http, g.URL+"/healthz"); addrInUse(err) {
		return err
	}
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
	g.release()
	var err error
	if in != nil {
		err = in.Close()
	}
	if proc != nil {
		if err = proc.Terminate(10 * time.Second); err != nil {
			err = fmt.Errorf("%w\n%s", err, proc.Tail()) // a crash at shutdown says what crashed
		}
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
