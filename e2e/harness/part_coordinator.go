package harness

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/coordinator"
)

// Coordinator is the cluster's coordinator: in this process
// (coordinator.New) or a `capgate coordinator` process. Its address and
// data directory stay the same across Kill and Restart. Safe for
// concurrent use.
type Coordinator struct {
	c          *Cluster
	Addr       string // host:port
	URL        string // http://Addr
	DataDir    string
	process    bool
	configFile string // the process's config file

	mu   sync.Mutex
	in   *coordinator.Coordinator
	done chan error
	proc *Process
}

func (c *Cluster) startCoordinator(t testing.TB) {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	co := &Coordinator{c: c, Addr: addr, URL: "http://" + addr, DataDir: t.TempDir(), process: c.opts.CoordinatorProcess,
		configFile: filepath.Join(t.TempDir(), "coordinator.yaml")}
	c.Coordinator = co
	co.start(t)
	cleanup(t, "coordinator", func() { co.stop(t) })
}

// freeAddr picks a free loopback port: the parts that restart must come
// back on the same address.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("harness: free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func (co *Coordinator) config() coordinator.Config {
	c, tm := co.c, co.c.opts.Timing
	cfg := coordinator.DefaultConfig()
	cfg.Listen, cfg.DataDir = co.Addr, co.DataDir
	cfg.Broker = c.brokerConfig()
	cfg.AdminTokenHashes, cfg.SyncTokenHashes = []string{c.adminHash}, []string{c.syncHash}
	cfg.CapabilityLease, cfg.Leeway = tm.CapabilityLease, tm.Leeway
	cfg.ShutdownTimeout = 5 * time.Second
	g := &cfg.Groups
	g.HeartbeatWait, g.SessionTimeoutMin = tm.HeartbeatWait, time.Second
	g.HandoffTimeout, g.GatewayTimeout, g.MaxClockSkew = tm.HandoffTimeout, tm.GatewayTimeout, tm.MaxClockSkew
	g.SyncWaitMax = tm.SyncWait
	return cfg
}

func (co *Coordinator) start(t testing.TB) {
	t.Helper()
	if co.process {
		co.startProcess(t)
	} else {
		co.startInProcess(t)
	}
	Eventually(t, 20*time.Second, "coordinator healthy", func() (bool, string) {
		status, err := co.c.get(co.URL + "/healthz")
		if co.process && co.proc.Exited() {
			t.Fatalf("coordinator exited: %v\n%s", co.proc.Wait(0), co.proc.Tail())
		}
		return status == http.StatusOK, fmt.Sprintf("status %d, %v", status, err)
	})
}

func (co *Coordinator) startInProcess(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", co.Addr)
	if err != nil {
		t.Fatalf("coordinator listen: %v", err)
	}
	in, err := coordinator.New(co.config(), co.c.logger.Named("coordinator"), coordinator.WithListener(ln), coordinator.WithBroker(co.c.Broker))
	if err != nil {
		t.Fatalf("coordinator: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- in.Run(context.Background()) }()
	co.mu.Lock()
	co.in, co.done = in, done
	co.mu.Unlock()
}

// coordinatorFile is the layout of the capgate config file.
type coordinatorFile struct {
	Log         map[string]string  `yaml:"log"`
	Coordinator coordinator.Config `yaml:"coordinator"`
}

func (co *Coordinator) startProcess(t testing.TB) {
	t.Helper()
	if co.c.opts.Binaries.Capgate == "" {
		t.Fatal("harness: CoordinatorProcess needs Options.Binaries (harness.Build)")
	}
	b, err := yaml.Marshal(coordinatorFile{Log: map[string]string{"level": "info", "format": "json"}, Coordinator: co.config()})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(co.configFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	proc := StartProcess(t, "coordinator", co.c.opts.Binaries.Capgate, []string{"coordinator", "--config", co.configFile}, cleanEnv(), nil, nil)
	co.mu.Lock()
	co.proc = proc
	co.mu.Unlock()
}

// Kill stops the coordinator at once: SIGKILL for a process, Close for
// one in this process (graceful: held polls answered 503).
func (co *Coordinator) Kill(t testing.TB) {
	t.Helper()
	co.c.Log.AddFault("kill", "coordinator")
	co.mu.Lock()
	proc, in, done := co.proc, co.in, co.done
	co.in = nil
	co.mu.Unlock()
	if co.process {
		proc.Kill()
		return
	}
	if in != nil {
		_ = in.Close()
		<-done
	}
}

// Restart starts the coordinator again on the same address and data
// directory and waits until it is healthy.
func (co *Coordinator) Restart(t testing.TB) {
	t.Helper()
	co.c.Log.AddFault("restart", "coordinator")
	co.start(t)
}

func (co *Coordinator) stop(t testing.TB) {
	co.c.http.CloseIdleConnections()
	co.mu.Lock()
	proc, in, done := co.proc, co.in, co.done
	co.mu.Unlock()
	if co.process {
		if !proc.Exited() {
			_ = proc.Signal(sigTerm)
			if err := proc.Wait(10 * time.Second); err != nil && !proc.Exited() {
				proc.Kill()
			}
		}
		return
	}
	if in != nil {
		_ = in.Close()
		if err := <-done; err != nil {
			t.Errorf("coordinator run: %v", err)
		}
	}
}

// Process is the coordinator's process (nil in-process).
func (co *Coordinator) Process() *Process {
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.proc
}
