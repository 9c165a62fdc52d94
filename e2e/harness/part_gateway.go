package harness

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/gateway"
)

// Gateway is one gateway of the cluster: in this process (gateway.New)
// or a `capgate gateway` process. It reaches the coordinator through its
// own Proxy (which a test can blackhole) and the cluster's SyncTap. Its
// id, address and URL stay the same across Kill and Restart. Safe for
// concurrent use.
type Gateway struct {
	c       *Cluster
	ID      string
	Addr    string // host:port
	URL     string // http://Addr
	Proxy   *Proxy // between this gateway and the SyncTap
	process bool
	dir     string

	mu   sync.Mutex
	in   *gateway.Gateway
	proc *Process
}

// AddGateway starts one more gateway and waits until it is ready.
func (c *Cluster) AddGateway(t testing.TB) *Gateway {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := StartProxy(c.Tap.Addr())
	if err != nil {
		t.Fatal(err)
	}
	cleanup(t, "proxy", proxy.Close)
	c.mu.Lock()
	id := fmt.Sprintf("gateway-%d", len(c.gateways)+1)
	g := &Gateway{c: c, ID: id, Addr: addr, URL: "http://" + addr, Proxy: proxy, process: c.opts.GatewayProcesses, dir: t.TempDir()}
	c.gateways = append(c.gateways, g)
	c.mu.Unlock()
	g.start(t)
	cleanup(t, id, g.stop)
	g.WaitReady(t, 20*time.Second)
	return g
}

func (g *Gateway) config() gateway.Config {
	c, tm := g.c, g.c.opts.Timing
	cfg := gateway.DefaultConfig()
	cfg.ID, cfg.Listen, cfg.CoordinatorURL = g.ID, g.Addr, g.Proxy.URL()
	cfg.SyncWait, cfg.SyncTimeout, cfg.Leeway = tm.SyncWait, tm.SyncTimeout, tm.Leeway
	cfg.Issuer, cfg.Audience = coordinator.DefaultConfig().ID, coordinator.DefaultConfig().Cluster
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.Broker = c.brokerConfig()
	return cfg
}

func (g *Gateway) start(t testing.TB) {
	t.Helper()
	if g.process {
		g.startProcess(t)
		return
	}
	cfg := g.config()
	cfg.SyncToken = gateway.Secret(g.c.syncToken)
	core := zapcore.NewTee(g.c.logger.Named(g.ID).Core(), TraceCore(g.ID, g.c.Log))
	in, err := gateway.New(cfg, zap.New(core))
	if err != nil {
		t.Fatalf("%s: %v", g.ID, err)
	}
	// The old listener may linger a moment after a Close.
	Eventually(t, 10*time.Second, g.ID+" listening", func() (bool, string) {
		err := in.Start()
		return err == nil, fmt.Sprint(err)
	})
	g.mu.Lock()
	g.in = in
	g.mu.Unlock()
}

type gatewayFile struct {
	Log     map[string]string `yaml:"log"`
	Gateway gateway.Config    `yaml:"gateway"`
}

func (g *Gateway) startProcess(t testing.TB) {
	t.Helper()
	b, err := yaml.Marshal(gatewayFile{Log: map[string]string{"level": "info", "format": "json"}, Gateway: g.config()})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(g.dir, "gateway.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	env := cleanEnv("CAPGATE_GATEWAY_SYNC_TOKEN=" + g.c.syncToken)
	onLine := func(line []byte) {
		if f, ok := ParseTraceLine(g.ID, line); ok {
			g.c.Log.AddFetch(f)
		}
	}
	proc := StartProcess(t, g.ID, g.c.opts.Binaries.Capgate, []string{"gateway", "--config", path}, env, onLine, onLine)
	g.mu.Lock()
	g.proc = proc
	g.mu.Unlock()
}

// WaitReady waits until GET /readyz answers 200.
func (g *Gateway) WaitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, g.ID+" ready", func() (bool, string) {
		status, err := g.Ready()
		if p := g.Process(); p != nil && p.Exited() {
			t.Fatalf("%s exited: %v\n%s", g.ID, p.Wait(0), p.Tail())
		}
		return status == http.StatusOK, fmt.Sprintf("status %d, %v", status, err)
	})
}

// Ready is the status of GET /readyz (0 with the error when unreachable).
func (g *Gateway) Ready() (int, error) { return g.c.get(g.URL + "/readyz") }

// Kill stops the gateway at once: SIGKILL for a process, Close for one
// in this process (fetches in flight answer 503).
func (g *Gateway) Kill() {
	g.c.Log.AddFault("kill", g.ID)
	g.stop()
}

// Restart starts the gateway again with the same id and address; it is
// not waited for (see WaitReady): a fresh gateway refuses with 503 until
// its first sync.
func (g *Gateway) Restart(t testing.TB) {
	t.Helper()
	g.c.Log.AddFault("restart", g.ID)
	g.start(t)
}

// Signal sends sig to the gateway's process (SIGSTOP, SIGCONT).
func (g *Gateway) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	p := g.Process()
	if p == nil {
		t.Fatalf("%s: signals need a gateway process", g.ID)
	}
	g.c.Log.AddFault(sig.String(), g.ID)
	if err := p.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

func (g *Gateway) stop() {
	g.c.http.CloseIdleConnections()
	g.mu.Lock()
	in, proc := g.in, g.proc
	g.in, g.proc = nil, nil
	g.mu.Unlock()
	if in != nil {
		_ = in.Close()
	}
	if proc != nil && !proc.Exited() {
		proc.Kill()
	}
}

// Process is the gateway's process (nil in-process or when stopped).
func (g *Gateway) Process() *Process {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.proc
}
