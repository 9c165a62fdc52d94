// Package failguard limits failed authentications per client address. A
// token that fails to verify costs the server a signature check (an
// Ed25519 verification is several times the cost of answering a trivial
// request) and is never cached, so a client sending forged or garbage
// tokens can spend a server's CPU for others; past a budget of failures
// its further unverified tokens are refused before they are checked.
//
// Each address has a token bucket of failures: Burst at most, refilled at
// PerSecond; a failure takes one, and an address whose bucket holds less
// than one is blocked until it refills. Successes cost nothing and a
// token already verified (a cache hit) never asks, so an honest client is
// never slowed. IPv6 addresses count per /64 (one host's usual
// allocation: an attacker rotating addresses within it is one key). The
// table keeps at most Max addresses; when full, buckets that have refilled
// (no state) are dropped, and if none has, every new address shares one
// overflow bucket — a flood of distinct addresses is throttled together
// instead of growing the table. The zero Addr is a key of its own: checks
// made before the client's address is known.
//
// A guard that remembers holders (Remember, holders.go) does not refuse
// everyone behind a spent address: a token whose holder verified from the
// address before is still checked, on that (address, holder)'s own small
// budget (Admit, Verified, Rejected), so a neighbour's forgeries do not
// lock out the valid tokens of holders the address has already seen.
//
// Written here rather than with golang.org/x/time/rate: that limiter
// meters admissions, while this one charges only failures and must answer
// "blocked?" without taking anything, so a check before the signature is
// read-only and a success leaves the bucket as it was. Time is an
// argument; safe for concurrent use.
package failguard

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// Spent is a refusal: the address spent its failures; one more is
// allowed after Wait. Servers answer it 429 rate_limited with
// Retry-After (the gateway's Kafka listener: a refused handshake).
type Spent struct {
	Wait time.Duration
	// holders: the guard remembers holders (Remember), so past the
	// address's budget a token is still checked if its holder verified
	// from the address before; holder: this token's holder did, and spent
	// its own budget too.
	holders, holder bool
}

func (e *Spent) Error() string {
	wait := e.Wait.Round(time.Millisecond).String()
	switch {
	case e.holder:
		return "too many tokens from this address naming this token's holder failed verification; its new tokens are not checked for " + wait
	case e.holders:
		return "too many tokens from this address failed verification; for " + wait +
			" a new token is checked only if its holder was verified from this address before (a first token of any other holder is refused)"
	}
	return "too many tokens from this address failed verification; new tokens are not checked for " + wait
}

// Check is Blocked as an error: a *Spent when addr is blocked at now.
func (g *Guard) Check(addr netip.Addr, now time.Time) error {
	wait, blocked := g.Blocked(addr, now)
	if !blocked {
		return nil
	}
	return &Spent{Wait: max(wait, time.Millisecond)}
}

// Addr is a connection's peer address as a key (invalid if not TCP).
func Addr(a net.Addr) netip.Addr {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort().Addr()
	}
	return netip.Addr{}
}

// Guard is the per-address failure budget.
type Guard struct {
	perSecond float64
	burst     float64
	max       int

	mu       sync.Mutex
	buckets  map[netip.Addr]*bucket
	overflow bucket
	holders  *holderTable // nil unless Remember: the known-holder path (holders.go)
}

type bucket struct {
	tokens float64 // failures still allowed; may fall below 1
	last   time.Time
}

// New allows burst failures at once and perSecond on average per address,
// tracking at most maxAddrs addresses. perSecond <= 0 turns the guard
// off.
func New(perSecond float64, burst, maxAddrs int) *Guard {
	return &Guard{perSecond: perSecond, burst: float64(max(burst, 1)), max: max(maxAddrs, 1), buckets: map[netip.Addr]*bucket{}}
}

// Key is the bucket key of a client address: IPv4 (also IPv4-mapped IPv6)
// as is, IPv6 masked to its /64.
func Key(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if a.Is6() {
		p, err := a.Prefix(64)
		if err == nil {
			return p.Addr()
		}
	}
	return a
}

// Blocked reports whether addr has spent its failures at now and, if so,
// how long until one more is allowed. It changes nothing.
func (g *Guard) Blocked(addr netip.Addr, now time.Time) (time.Duration, bool) {
	if g == nil || g.perSecond <= 0 {
		return 0, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.buckets[Key(addr)]
	if b == nil {
		if len(g.buckets) < g.max {
			return 0, false
		}
		b = &g.overflow
	}
	tokens := g.refilled(b, now)
	if tokens >= 1 {
		return 0, false
	}
	return time.Duration((1 - tokens) / g.perSecond * float64(time.Second)), true
}

// Failed charges one failed authentication to addr at now.
func (g *Guard) Failed(addr netip.Addr, now time.Time) {
	if g == nil || g.perSecond <= 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	key := Key(addr)
	b := g.buckets[key]
	if b == nil {
		if len(g.buckets) >= g.max {
			g.dropRefilledLocked(now)
		}
		if len(g.buckets) >= g.max {
			b = &g.overflow
		} else {
			b = &bucket{tokens: g.burst, last: now}
			g.buckets[key] = b
		}
	}
	b.tokens = g.refilled(b, now) - 1
	b.last = now
}

// Len is how many addresses the guard tracks.
func (g *Guard) Len() int {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.buckets)
}

// refilled is b's tokens at now (not stored). A zero-value bucket (the
// overflow's first use) starts full.
func (g *Guard) refilled(b *bucket, now time.Time) float64 {
	return refill(b, now, g.perSecond, g.burst)
}

// refill is b's tokens at now under perSecond and burst (not stored); a
// zero-value bucket starts full.
func refill(b *bucket, now time.Time, perSecond, burst float64) float64 {
	if b.last.IsZero() {
		return burst
	}
	elapsed := now.Sub(b.last).Seconds()
	if elapsed < 0 {
		elapsed = 0 // a clock stepping back refills nothing
	}
	return min(burst, b.tokens+elapsed*perSecond)
}

func (g *Guard) dropRefilledLocked(now time.Time) {
	for k, b := range g.buckets {
		if g.refilled(b, now) >= g.burst {
			delete(g.buckets, k)
		}
	}
}
