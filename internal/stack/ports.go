package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A part keeps its address for the stack's life, so that a restart comes
// back on it; with port 0 asked for, the stack picks it. Picking it as
// FreeAddr does — listen, read the port, close, hand it over — raced: a
// test running beside this one (CI runs every package at once) could
// take the port before the part bound it, and the part failed with
// "address already in use" (as TestPprofNeedsTheSyncToken did in CI).
// So the stack listens on port 0 itself and keeps that listener, its
// reservation, until the part's first start:
//
//   - a part in this process is handed the listener (coordinator
//     WithListener, gateway StartOn): no moment where the port is free;
//   - a process part cannot be handed a socket (it is told its address in
//     a config file), so the reservation is closed just before the
//     process starts. If the process then exits "address already in use",
//     its first start is tried again on a fresh reservation, at most
//     firstStartAttempts times — nobody has been told the address yet.
//
// A restart must come back on the same address: that is what a restart
// test tests, so the port stays fixed and only a failure "address already
// in use" is retried, for up to restartRetry (our own old listener may
// linger a moment; another's connection may hold the port briefly).

// firstStartAttempts bounds the fresh ports a process part's first start
// tries; restartRetry is how long a restart on the part's fixed address
// is retried while the address is in use.
const (
	firstStartAttempts = 5
	restartRetry       = 10 * time.Second
)

// startRetry decides whether a part's failed start is tried again.
type startRetry struct {
	move     bool // a process's first start, on a port the stack picked
	restart  bool
	attempts int
	deadline time.Time
	// fresh: the next attempt needs a fresh reservation (a new address).
	fresh bool
}

func newStartRetry(move, restart bool) *startRetry {
	return &startRetry{move: move, restart: restart, deadline: time.Now().Add(restartRetry)}
}

// partAddr is a part's address, fixed for the stack's life (but for a
// process's first start, above), and its reservation until the first
// start.
type partAddr struct {
	Addr string // host:port
	URL  string // scheme://Addr

	scheme string
	// movable: a process part, which the reservation cannot be handed
	// to; its first start may move it (an in-process part listens on
	// its reservation: an address in use is another listener's, such as
	// a kafka_listen the caller chose, which a new address would not
	// help).
	movable  bool
	mu       sync.Mutex
	reserved net.Listener // Addr, listened on until the first start
	started  bool         // Start was called: later ones are restarts
}

// init sets the address from the part's listen address (reserve).
func (a *partAddr) init(listen, scheme string, process bool) error {
	addr, ln, err := reserve(listen)
	if err != nil {
		return err
	}
	a.scheme, a.reserved, a.movable = scheme, ln, process
	a.setAddr(addr)
	return nil
}

// host is the address's host, for a fresh reservation on the same
// interface.
func (a *partAddr) host() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return hostOf(a.Addr)
}

func (a *partAddr) setAddr(addr string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.Addr, a.URL = addr, a.scheme+"://"+addr
}

// take hands the reservation over to a start (nil after the first) and
// says whether the start may move the part (a process's first start on
// a reservation) and whether it is a restart.
func (a *partAddr) take() (ln net.Listener, move, restart bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ln, move, restart = a.reserved, a.reserved != nil && a.movable, a.started
	a.reserved, a.started = nil, true
	return ln, move, restart
}

// release closes the reservation of a part stopped before it started.
func (a *partAddr) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reserved != nil {
		a.reserved.Close()
		a.reserved = nil
	}
}

// startingPart is what startPart needs of a Coordinator or a Gateway.
type startingPart interface {
	// start is one attempt, on ln when it is not nil (handed over or
	// closed, whatever the attempt's outcome).
	start(ctx context.Context, ln net.Listener) error
	Kill()
	take() (ln net.Listener, move, restart bool)
	host() string
	setAddr(addr string)
}

// startPart runs the start attempts of the part named name: on its
// reservation (none: the part binds its address itself), then as
// startRetry decides.
func startPart(ctx context.Context, p startingPart, name string) error {
	ln, move, restart := p.take()
	retry := newStartRetry(move, restart)
	for {
		err := p.start(ctx, ln)
		ln = nil
		if !retry.again(ctx, err) {
			return err
		}
		p.Kill() // a process that exited, reaped
		if retry.fresh {
			var addr string
			if addr, ln, err = reserve(net.JoinHostPort(p.host(), "0")); err != nil {
				return err
			}
			p.setAddr(addr)
		}
		onRetrying(name)
	}
}

// again says whether to try once more after an attempt that ended in
// err. A process's first start on a port the stack picked takes another
// port at once; a restart waits a moment for its own. Any other failure,
// an in-process part's first start (on its reservation: what was in use
// is another of its addresses) and a first start on a port the caller
// named (someone else's: another capgate dev) are returned as they are.
func (r *startRetry) again(ctx context.Context, err error) bool {
	r.attempts++
	r.fresh = false
	if !addrInUse(err) || ctx.Err() != nil {
		return false
	}
	switch {
	case r.move && r.attempts < firstStartAttempts:
		r.fresh = true
		return true
	case r.restart && time.Now().Before(r.deadline):
		time.Sleep(20 * time.Millisecond)
		return true
	}
	return false
}

// reserve turns a part's listen address into its address for the stack's
// life: one naming a port is kept as it is (nil reservation: the part
// binds it, or fails if it is taken — capgate dev's --*-addr flags); port
// 0 (or "": 127.0.0.1:0) is listened on now and the listener returned.
func reserve(addr string) (string, net.Listener, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, fmt.Errorf("stack: listen address %q: %w", addr, err)
	}
	if port != "0" {
		return addr, nil, nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", nil, fmt.Errorf("stack: free port: %w", err)
	}
	return ln.Addr().String(), ln, nil
}

// addrInUse says whether a part failed to start because its address was
// taken: an in-process part's error, or a process's last lines (its
// reason for exiting).
func addrInUse(err error) bool {
	return err != nil && (errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use"))
}

// hostOf is addr's host, for a fresh reservation on the same interface.
func hostOf(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "127.0.0.1"
	}
	return host
}

// testHooks let a test take a part's port at the worst moment
// (ports_test.go); nil in use.
var testHooks atomic.Pointer[portHooks]

type portHooks struct {
	// released: a process part's reservation was closed, the process is
	// not started yet.
	released func(part, addr string)
	// retrying: an attempt failed with the address in use; another
	// follows (on a fresh port on a first start).
	retrying func(part string)
}

func onReleased(part, addr string) {
	if h := testHooks.Load(); h != nil && h.released != nil {
		h.released(part, addr)
	}
}

func onRetrying(part string) {
	if h := testHooks.Load(); h != nil && h.retrying != nil {
		h.retrying(part)
	}
}

// ServingURL is the URL a part process's JSON log line says it serves
// on — "coordinator serving", "coordinator replica serving" or "gateway
// started", at info — or "" for any other line. A process told to
// listen on port 0 reports its own pick this way, where a port found
// free and handed over could be taken before it binds.
func ServingURL(line []byte) string {
	var l struct {
		Msg string `json:"msg"`
		URL string `json:"url"`
	}
	if json.Unmarshal(line, &l) != nil {
		return ""
	}
	switch l.Msg {
	case "coordinator serving", "coordinator replica serving", "gateway started":
		return l.URL
	}
	return ""
}
