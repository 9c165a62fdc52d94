package harness

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/stack"
)

// Gateway is one gateway of the cluster (stack.Gateway: in this process
// or a `capgate gateway` process). It reaches the coordinator through its
// own Proxy (which a test can blackhole) and the cluster's SyncTap; its
// faults are written to the log. Its id, address and URL stay the same
// across Kill and Restart. Safe for concurrent use.
type Gateway struct {
	*stack.Gateway
	Proxy *Proxy // between this gateway and the (first) SyncTap
	// Proxies lead to every coordinator replica's SyncTap (Proxy first).
	Proxies []*Proxy
	c       *Cluster
}

// AddGateway starts one more gateway behind its own proxy and waits
// until it is ready.
func (c *Cluster) AddGateway(t testing.TB) *Gateway {
	t.Helper()
	var proxies []*Proxy
	var urls []string
	for _, tap := range c.Taps {
		proxy, err := StartProxy(tap.Addr())
		if err != nil {
			t.Fatal(err)
		}
		cleanup(t, "proxy", proxy.Close)
		proxies, urls = append(proxies, proxy), append(urls, proxy.URL())
	}
	sg, err := c.NewGateway()
	if err != nil {
		t.Fatal(err)
	}
	sg.SetCoordinatorURL(strings.Join(urls, ","))
	g := &Gateway{Gateway: sg, Proxy: proxies[0], Proxies: proxies, c: c}
	c.mu.Lock()
	c.gateways = append(c.gateways, g)
	c.mu.Unlock()
	if err := sg.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	cleanup(t, g.ID, sg.Kill) // before its proxy closes
	g.WaitReady(t, 20*time.Second)
	return g
}

// WaitReady waits until GET /readyz answers 200.
func (g *Gateway) WaitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := g.Gateway.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
}

// Ready is the status of GET /readyz (0 with the error when unreachable).
func (g *Gateway) Ready() (int, error) { return g.Gateway.Ready(context.Background()) }

// Kill stops the gateway at once: SIGKILL for a process, Close for one
// in this process (fetches in flight answer 503).
func (g *Gateway) Kill() {
	g.c.Log.AddFault("kill", g.ID)
	g.Gateway.Kill()
}

// Restart starts the gateway again with the same id and address; it is
// not waited for (see WaitReady): a fresh gateway refuses with 503 until
// its first sync.
func (g *Gateway) Restart(t testing.TB) {
	t.Helper()
	g.c.Log.AddFault("restart", g.ID)
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Signal sends sig to the gateway's process (SIGSTOP, SIGCONT).
func (g *Gateway) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	g.c.Log.AddFault(sig.String(), g.ID)
	if err := g.Gateway.Signal(sig); err != nil {
		t.Fatal(err)
	}
}
