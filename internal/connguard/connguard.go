// Package connguard is the accept side of capgate's HTTP listeners (the
// coordinator's, a replica's and the gateway's): it keeps accepting
// through temporary accept errors and bounds the connections open at
// once, in total and per client address, answering the excess itself.
//
// Behavior:
//   - Accept errors. An accept that fails with a temporary error — out of
//     file descriptors (EMFILE, ENFILE), of buffers or memory (ENOBUFS,
//     ENOMEM), a connection aborted before it was taken (ECONNABORTED,
//     EPROTO), a timeout — is retried after a pause of 5 ms doubling to
//     1 s, as net/http's Server.Serve does, and reset by the next accepted
//     connection. The error is logged at WARN when it starts and at most
//     every LogEvery while it lasts, and counted (Collectors). Without this
//     fasthttp's Serve returned at the first EMFILE and the process shut
//     down: an unauthenticated connection flood stopped it (redteam6 #0).
//     Close ends a pause at once; any other error is returned as it is.
//   - Bounds. A connection beyond MaxConnections open at once, or beyond
//     MaxPerAddress from one client address (IPv4 address, IPv6 /64), is
//     answered with the caller's Answer for that refusal (capgate's JSON
//     503 with Retry-After; nothing under TLS, whose handshake would
//     block the accept loop) and closed. The address is the socket's
//     peer: connection-level limits cannot read X-Forwarded-For, so peers
//     the caller exempts (trusted_proxies, which carry many clients) are
//     bounded by MaxConnections only.
//   - Under pressure (three quarters of MaxConnections open), a
//     connection the server marked idle (MarkIdle, from fasthttp's
//     ConnState) waits for its next request at most IdleUnderPressure
//     (its read deadline is clamped), so that idle keep-alive
//     connections give their slots back to new ones.
//   - A refused connection lingers (its answer written, its write side
//     shut, what the client already sent read and dropped for up to
//     lingerTimeout) so that the client reads the answer rather than a
//     reset; at most lingerMax at once, beyond that it closes at once.
//
// The counted connection is returned wrapped (Conn): Close uncounts it
// once; NetConn and SyscallConn reach the connection below, which
// internal/linger, internal/crlf and tlsconf look through. Put the
// Listener directly above internal/quietio's (below TLS and crlf).
//
// A Listener is safe for concurrent use.
package connguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/internal/failguard"
)

// Backoff bounds of a failing accept (net/http's).
const (
	BackoffMin = 5 * time.Millisecond
	BackoffMax = time.Second
	// LogEvery bounds the WARN lines of accept errors while they last.
	LogEvery = 10 * time.Second
)

// Refusal is why a connection was refused.
type Refusal int

const (
	// RefusedTotal: MaxConnections connections are open.
	RefusedTotal Refusal = iota
	// RefusedPerAddress: MaxPerAddress connections from its address are open.
	RefusedPerAddress
)

func (r Refusal) String() string {
	if r == RefusedPerAddress {
		return "per_address"
	}
	return "total"
}

// Config is what a Listener bounds and how it answers.
type Config struct {
	// MaxConnections bounds the connections open at once (0: unbounded).
	MaxConnections int
	// MaxPerAddress bounds those from one address (0: unbounded).
	MaxPerAddress int
	// Exempt reports peers bounded by MaxConnections only (nil: none).
	Exempt func(netip.Addr) bool
	// Answer is the bytes written to a refused connection before it
	// closes (nil: closed without an answer).
	Answer func(Refusal) []byte
	// IdleUnderPressure bounds an idle connection's wait for its next
	// request while three quarters of MaxConnections are open (0: no
	// bound beyond the server's idle timeout).
	IdleUnderPressure time.Duration
	// Log gets the rate-limited accept-error lines (nil: none).
	Log *zap.Logger
	// Sleep pauses for d or until done closes (nil: a timer; tests).
	Sleep func(d time.Duration, done <-chan struct{})
}

// Listener is a net.Listener with the package's behavior.
type Listener struct {
	net.Listener
	cfg       Config
	done      chan struct{}
	closeOnce sync.Once

	mu     sync.Mutex
	open   atomic.Int64 // written under mu, read without it
	byAddr map[netip.Addr]int

	// Accept's own state (one Accept at a time, as fasthttp calls it).
	failing     int       // consecutive accept failures
	failedSince time.Time // the failure run's start
	loggedAt    time.Time

	acceptErrors atomic.Uint64
	refused      [2]atomic.Uint64
	answers      [2][]byte
}

// Listen wraps ln.
func Listen(ln net.Listener, cfg Config) *Listener {
	l := &Listener{Listener: ln, cfg: cfg, done: make(chan struct{}), byAddr: make(map[netip.Addr]int)}
	if cfg.Log == nil {
		l.cfg.Log = zap.NewNop()
	}
	if cfg.Sleep == nil {
		l.cfg.Sleep = sleep
	}
	if cfg.Answer != nil {
		l.answers = [2][]byte{cfg.Answer(RefusedTotal), cfg.Answer(RefusedPerAddress)}
	}
	return l
}

func sleep(d time.Duration, done <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-done:
	}
}

// Accept returns the next connection within the bounds, retrying
// temporary errors and answering refused connections itself.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if l.closed() || !Temporary(err) {
				return nil, err
			}
			l.failed(err)
			continue
		}
		l.recovered()
		if gc, ok := l.admit(c); ok {
			return gc, nil
		}
	}
}

// Temporary reports whether an accept error passes: the process or
// system is short of something, or one connection failed before it was
// taken. A closed listener's error is not.
func Temporary(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	for _, e := range [...]syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EPROTO, syscall.EINTR, syscall.EAGAIN, syscall.ETIMEDOUT} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// failed counts, logs (rate-limited) and waits out one accept error.
func (l *Listener) failed(err error) {
	l.acceptErrors.Add(1)
	now := time.Now()
	if l.failing == 0 {
		l.failedSince = now
	}
	l.failing++
	if l.failing == 1 || now.Sub(l.loggedAt) >= LogEvery {
		l.loggedAt = now
		l.cfg.Log.Warn("accept failed; retrying (out of file descriptors? see RLIMIT_NOFILE and max_connections)",
			zap.Error(err), zap.Int("failures", l.failing), zap.Duration("failing_for", now.Sub(l.failedSince)))
	}
	l.cfg.Sleep(Backoff(l.failing), l.done)
}

func (l *Listener) recovered() {
	if l.failing > 0 {
		l.cfg.Log.Info("accepting again", zap.Int("failures", l.failing), zap.Duration("failed_for", time.Since(l.failedSince)))
		l.failing = 0
	}
}

// Backoff is the pause after the n-th consecutive failure (n ≥ 1).
func Backoff(n int) time.Duration {
	d := BackoffMin
	for i := 1; i < n && d < BackoffMax; i++ {
		d *= 2
	}
	return min(d, BackoffMax)
}

func (l *Listener) closed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// Close closes the listener and ends a pause.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// admit counts c in or refuses it.
func (l *Listener) admit(c net.Conn) (net.Conn, bool) {
	addr, limited := l.key(c)
	l.mu.Lock()
	refusal := -1
	switch {
	case l.cfg.MaxConnections > 0 && l.open.Load() >= int64(l.cfg.MaxConnections):
		refusal = int(RefusedTotal)
	case limited && l.byAddr[addr] >= l.cfg.MaxPerAddress:
		refusal = int(RefusedPerAddress)
	default:
		l.open.Add(1)
		if limited {
			l.byAddr[addr]++
		}
	}
	l.mu.Unlock()
	if refusal >= 0 {
		l.refused[refusal].Add(1)
		refuse(c, l.answers[refusal])
		return nil, false
	}
	return &Conn{Conn: c, l: l, addr: addr, limited: limited}, true
}

// key is c's address for the per-address bound; false when it has none.
func (l *Listener) key(c net.Conn) (netip.Addr, bool) {
	if l.cfg.MaxPerAddress <= 0 {
		return netip.Addr{}, false
	}
	a := peerIP(c.RemoteAddr())
	if !a.IsValid() || l.cfg.Exempt != nil && l.cfg.Exempt(a) {
		return netip.Addr{}, false
	}
	return failguard.Key(a), true // IPv6 per /64, as the failure budget
}

// peerIP is peer's IP, IPv4-mapped unmapped and zone dropped (invalid
// when peer has none).
func peerIP(peer net.Addr) netip.Addr { return failguard.Addr(peer).Unmap().WithZone("") }

// AddressKey is what a connection from peer counts against in a
// per-address bound — its IP (IPv4-mapped unmapped, zone dropped), an
// IPv6 one per /64 as the failure budget keys it — false when peer has
// no IP. The gateway's Kafka listener bounds its connections by it too.
func AddressKey(peer net.Addr) (netip.Addr, bool) {
	a := peerIP(peer)
	if !a.IsValid() {
		return netip.Addr{}, false
	}
	return failguard.Key(a), true
}

func (l *Listener) release(addr netip.Addr, limited bool) {
	l.mu.Lock()
	l.open.Add(-1)
	if limited {
		if n := l.byAddr[addr] - 1; n > 0 {
			l.byAddr[addr] = n
		} else {
			delete(l.byAddr, addr)
		}
	}
	l.mu.Unlock()
}

// Open is the number of connections open now.
func (l *Listener) Open() int { return int(l.open.Load()) }

// Conn is an admitted connection: Close uncounts it once.
type Conn struct {
	net.Conn
	l       *Listener
	addr    netip.Addr
	limited bool
	once    sync.Once
	idle    atomic.Bool // between requests (MarkIdle)
}

// MarkIdle records whether the server waits for c's next request (c or
// a connection it wraps through NetConn methods: internal/crlf, TLS);
// call it from fasthttp's ConnState. A connection that is no Conn is
// left alone.
func MarkIdle(c net.Conn, idle bool) {
	for {
		if gc, ok := c.(*Conn); ok {
			gc.idle.Store(idle)
			return
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return
		}
		c = u.NetConn()
	}
}

// SetReadDeadline sets the read deadline, clamped to IdleUnderPressure
// from now for an idle connection while the listener is under pressure.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if d := c.l.cfg.IdleUnderPressure; d > 0 && c.idle.Load() && c.l.underPressure() {
		if short := time.Now().Add(d); t.IsZero() || t.After(short) {
			t = short
		}
	}
	return c.Conn.SetReadDeadline(t)
}

// underPressure reports whether three quarters of MaxConnections are open.
func (l *Listener) underPressure() bool {
	return l.cfg.MaxConnections > 0 && 4*l.open.Load() >= 3*int64(l.cfg.MaxConnections)
}

// Close closes the connection and frees its slot.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.addr, c.limited) })
	return err
}

// NetConn is the connection below (internal/linger unwraps through it).
func (c *Conn) NetConn() net.Conn { return c.Conn }

// SyscallConn is the raw connection below (tlsconf, internal/crlf and
// the gateway's hangup watch reach the descriptor through it).
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("connguard: connection has no descriptor")
	}
	return sc.SyscallConn()
}

// Collectors are the listener's metrics, named capgate_<process>_….
func (l *Listener) Collectors(process string) []prometheus.Collector {
	name := func(s string) string { return fmt.Sprintf("capgate_%s_%s", process, s) }
	cs := []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name("http_accept_errors_total"),
			Help: "HTTP accepts that failed with a temporary error (out of file descriptors, …) and were retried after a backoff."},
			func() float64 { return float64(l.acceptErrors.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name("http_connections_open"),
			Help: "HTTP connections open now (bounded by max_connections)."},
			func() float64 { return float64(l.Open()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name("http_connections_max"),
			Help: "HTTP connections served at once: max_connections, or fewer when the file descriptor limit cannot hold it with the other connections (logged at start)."},
			func() float64 { return float64(l.cfg.MaxConnections) }),
	}
	for _, r := range [...]Refusal{RefusedTotal, RefusedPerAddress} {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name("http_connections_refused_total"),
			Help:        "HTTP connections refused at accept: over max_connections (total) or max_connections_per_address (per_address).",
			ConstLabels: prometheus.Labels{"limit": r.String()}},
			func() float64 { return float64(l.refused[r].Load()) }))
	}
	return cs
}

// IdleUnderPressure is the servers' Config.IdleUnderPressure.
const IdleUnderPressure = 5 * time.Second

// Concurrency is fasthttp's Server.Concurrency for a Listener bounding
// maxConnections: a little above it, since a closed connection frees its
// slot here a moment before its worker returns to fasthttp's pool, and
// fasthttp would answer a connection in between with its own plain-text
// 503. The Listener's bound is the one that answers.
func Concurrency(maxConnections int) int { return maxConnections + maxConnections/16 + 64 }

// ConnState is a fasthttp.Server's ConnState: it marks connections idle
// between requests (MarkIdle).
func ConnState(c net.Conn, state fasthttp.ConnState) { MarkIdle(c, state == fasthttp.StateIdle) }

// Server is a capgate HTTP server's listener settings (the coordinator's,
// a replica's, the gateway's): ListenServer.
type Server struct {
	Who        string   // in the refusals: "the gateway", "the coordinator"
	Process    string   // the metrics' prefix: "gateway", "coordinator"
	Max        Budget   // max_connections, fitted to the descriptors with Others
	Others     []Budget // other connections of the process (the Kafka listener's)
	PerAddress int      // max_connections_per_address, at most the fitted Max
	// IdleTimeout is the server's idle_timeout: an idle connection under
	// pressure waits at most the shorter of it and IdleUnderPressure.
	IdleTimeout time.Duration
	Exempt      func(netip.Addr) bool // trusted proxies: bounded in total only
	TLS         bool                  // refusals closed unanswered (a handshake would hold the accept loop)
}

// ListenServer wraps a server's raw listener ln, below TLS and
// internal/crlf, and registers its metrics with reg.
func ListenServer(ln net.Listener, s Server, log *zap.Logger, reg prometheus.Registerer) *Listener {
	maxConnections := FitDescriptors(log, s.Max, s.Others...)
	perAddress := min(s.PerAddress, maxConnections)
	cfg := Config{
		MaxConnections:    maxConnections,
		MaxPerAddress:     perAddress,
		Exempt:            s.Exempt,
		Log:               log,
		IdleUnderPressure: min(IdleUnderPressure, s.IdleTimeout),
	}
	if !s.TLS {
		cfg.Answer = OverloadedAnswers(s.Who, maxConnections, perAddress)
	}
	l := Listen(ln, cfg)
	reg.MustRegister(l.Collectors(s.Process)...)
	return l
}
