package stack

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"
)

// holdPorts takes addresses as a test running beside the stack would,
// and gives them back on demand.
type holdPorts struct {
	mu   sync.Mutex
	held map[string]net.Listener // part → its listener on the part's address
	took map[string]string       // part → the address taken
}

func (h *holdPorts) take(t *testing.T, part, addr string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		h.held, h.took = map[string]net.Listener{}, map[string]string{}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Errorf("taking %s's %s: %v", part, addr, err)
		return
	}
	h.held[part], h.took[part] = ln, addr
	t.Cleanup(func() { ln.Close() })
}

func (h *holdPorts) give(part string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ln := h.held[part]; ln != nil {
		ln.Close()
		delete(h.held, part)
	}
}

func (h *holdPorts) taken(part string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.took[part]
}

func setHooks(t *testing.T, h *portHooks) {
	testHooks.Store(h)
	t.Cleanup(func() { testHooks.Store(nil) })
}

// TestPortReservedUntilFirstStart: an in-process part's address, picked
// when it is added, stays listened on until the part serves on it — a
// port found free and closed was taken by tests beside it in CI.
func TestPortReservedUntilFirstStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{Dir: t.TempDir(), Topics: map[string]int32{"t": 1}, Timing: TestTiming()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, err := s.NewGateway()
	if err != nil {
		t.Fatal(err)
	}
	if ln, err := net.Listen("tcp", g.Addr); !addrInUse(err) {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("%s's address %s before its start: listen %v, want it held (address in use)", g.ID, g.Addr, err)
	}
	addr := g.Addr
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if g.Addr != addr || g.InProcess().Addr() != addr {
		t.Fatalf("%s serves on %s (Addr %s), want %s", g.ID, g.InProcess().Addr(), g.Addr, addr)
	}
}

// TestRestartWaitsForItsAddress: a part restarts on its own address;
// one taken while it was down is tried again until it is given back.
func TestRestartWaitsForItsAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{Dir: t.TempDir(), Topics: map[string]int32{"t": 1}, Gateways: 1, Timing: TestTiming()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ports holdPorts
	retried := map[string]int{}
	var mu sync.Mutex
	setHooks(t, &portHooks{retrying: func(part string) {
		mu.Lock()
		retried[part]++
		mu.Unlock()
		ports.give(part)
	}})
	for _, part := range []interface {
		Kill()
		Start(context.Context) error
	}{s.Gateways()[0], s.Coordinator()} {
		name, addr := s.Gateways()[0].ID, s.Gateways()[0].Addr
		if co, ok := part.(*Coordinator); ok {
			name, addr = co.Name, co.Addr
		}
		part.Kill()
		ports.take(t, name, addr)
		if err := part.Start(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		mu.Lock()
		n := retried[name]
		mu.Unlock()
		if n == 0 {
			t.Errorf("%s restarted with its address %s taken and never retried", name, addr)
		}
	}
	if err := s.Gateways()[0].WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestProcessPartsTakenPorts: a process part cannot be handed its
// reserved listener, so its port is free a moment before the process
// binds it. Taken in that moment, the first start moves to another free
// port; a restart waits for its own.
func TestProcessPartsTakenPorts(t *testing.T) {
	if ok, why := SignalsSupported(); !ok {
		t.Skip(why)
	}
	if testing.Short() {
		t.Skip("builds the capgate binary")
	}
	bin, err := BuildOnce("./cmd/capgate")
	if err != nil {
		t.Fatal(err)
	}
	var ports holdPorts
	setHooks(t, &portHooks{
		released: func(part, addr string) {
			if ports.taken(part) == "" {
				ports.take(t, part, addr)
			}
		},
		retrying: func(part string) { ports.give(part) },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{Dir: t.TempDir(), Topics: map[string]int32{"t": 1}, Gateways: 1, Timing: TestTiming(),
		CoordinatorProcess: true, GatewayProcesses: true, Binary: bin})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	co, g := s.Coordinator(), s.Gateways()[0]
	for part, addr := range map[string]string{co.Name: co.Addr, g.ID: g.Addr} {
		if taken := ports.taken(part); taken == "" || taken == addr {
			t.Errorf("%s on %s, its first port %q taken: want another", part, addr, taken)
		}
	}
	addr := g.Addr
	g.Kill()
	ports.take(t, g.ID+" again", addr)
	setHooks(t, &portHooks{retrying: func(string) { ports.give(g.ID + " again") }})
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if g.Addr != addr {
		t.Fatalf("restarted on %s, want its own %s", g.Addr, addr)
	}
}

// TestPortRangesBelowEphemeral: ReservePortRanges holds its ranges below
// the kernel's ephemeral ports, where outgoing connections never take a
// port (a range from a port-0 listener needs the even, connect()-given
// ports after it: TestPeersSpreadPartitions failed "no 4 consecutive free
// ports" beside a consumer of 2,000 partitions), each range's ports held
// until released and free after.
func TestPortRangesBelowEphemeral(t *testing.T) {
	const n, width = 3, 4
	r, err := ReservePortRanges("", n, width)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, high := belowEphemeral(width)
	for i, addr := range r.Addrs {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		if int(ap.Port()) >= high {
			t.Errorf("range %d at %s: in the ephemeral ports (from %d)", i, addr, high+width)
		}
		port := func(j int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ap.Port())+j)) }
		for j := range width {
			if l, err := net.Listen("tcp", port(j)); err == nil {
				l.Close()
				t.Errorf("range %d: port %s not held", i, port(j))
			}
		}
		r.Release(i)
		for j := range width {
			l, err := net.Listen("tcp", port(j))
			if err != nil {
				t.Errorf("range %d released: %v", i, err)
				continue
			}
			l.Close()
		}
	}
}
