package client

import (
	"container/list"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/capgate/capgate/tlsconf"
)

// DefaultFetchPoolMax is the default pool's bound on the fetches in
// flight from this process to one gateway address (FetchPool).
const DefaultFetchPoolMax = 1024

// A FetchPool is what the consumers of one process share of the
// gateways they fetch from: at most its bound of fetches (fetched ahead
// included) in flight to one gateway address (scheme and host:port), and
// the keep-alive connections they go on.
//
// Each fetch is an HTTP/1.1 request on a connection of its own, a long
// poll while its partition is idle, so the bound is also how many
// connections the process holds to a gateway: a gateway serves at most
// max_connections_per_address (2,000 by default) from one address, and
// in flight at most max_inflight_fetches_per_tenant (1,024) per tenant.
// Before, each consumer had a bound and connections of its own: 50
// consumers of 40 partitions each held 2,000 connections to a gateway,
// and the 51st consumer of a service found the gateway refusing it.
//
// Fairness: when a slot frees and the fetches of several consumers wait,
// the consumers take turns, one fetch each (a consumer of 2,000
// partitions waiting for slots does not hold back another's single
// partition); the fetches of one consumer go first come first served.
// A consumer holds at most its Config.GatewayFetchesMax of them.
//
// Consumers built without WithFetchPool share the process's default
// pool (DefaultFetchPoolMax per gateway address). Without
// WithHTTPClient, consumers of a pool with the same TLS settings also
// share its keep-alive connections to each gateway; a consumer's Close
// lets go of them, and the last consumer's Close closes them.
// Coordinator requests (joins, heartbeats, commits) stay on each
// consumer's own connections. Safe for concurrent use.
type FetchPool struct {
	fetchesMax int

	mu       sync.Mutex
	gateways map[string]*gatewayShare // by address: scheme://host:port
}

// NewFetchPool returns a pool of fetchesMax fetches in flight to each
// gateway address (values below 1 count as 1).
func NewFetchPool(fetchesMax int) *FetchPool {
	return &FetchPool{fetchesMax: max(fetchesMax, 1), gateways: map[string]*gatewayShare{}}
}

// defaultFetchPool is the pool of consumers without WithFetchPool.
var defaultFetchPool = NewFetchPool(DefaultFetchPoolMax)

// WithFetchPool makes a consumer share p's fetch slots and connections
// (see FetchPool) instead of the process's default pool's. Give every
// consumer of a process the same pool. Ignored by a Producer.
func WithFetchPool(p *FetchPool) Option { return func(o *options) { o.fetchPool = p } }

// gatewayShare is one gateway address's part of a FetchPool: its slots,
// and the SDK's own HTTP clients for fetches to it, one per TLS settings
// (a connection made with one client certificate never carries another
// consumer's fetch). transports is guarded by the pool's mutex.
type gatewayShare struct {
	slots      *fairSlots
	transports map[tlsconf.ClientConfig]*sharedClient
}

// sharedClient is an HTTP client of a gatewayShare and how many consumers
// use it.
type sharedClient struct {
	http  *http.Client
	users int
}

// gatewayAddress is the part of a gateway's base URL a pool shares by:
// scheme and host:port (a path prefix behind a proxy goes to the same
// host all the same).
func gatewayAddress(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return base
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

func (p *FetchPool) shareLocked(address string) *gatewayShare {
	g := p.gateways[address]
	if g == nil {
		g = &gatewayShare{slots: newFairSlots(p.fetchesMax), transports: map[tlsconf.ClientConfig]*sharedClient{}}
		p.gateways[address] = g
	}
	return g
}

// slotsOf returns the slots of base's address.
func (p *FetchPool) slotsOf(base string) *fairSlots {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.shareLocked(gatewayAddress(base)).slots
}

// client returns the pool's HTTP client for fetches to base with TLS
// settings files (tc: those settings loaded, for a client made now), and
// counts one more user of it; the user gives it back with letGo.
func (p *FetchPool) client(base string, files tlsconf.ClientConfig, tc *tlsconf.Client) *http.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.shareLocked(gatewayAddress(base))
	c := g.transports[files]
	if c == nil {
		hc := newHTTPClient(tc, p.fetchesMax)
		// Every request on it holds a slot, but a slot is given back
		// when its answer was read, a moment before its connection is
		// idle again: the next fetch would dial a connection of its own
		// meanwhile (1,386 for 1,024 slots). It waits for that one.
		hc.Transport.(*http.Transport).MaxConnsPerHost = p.fetchesMax
		c = &sharedClient{http: hc}
		g.transports[files] = c
	}
	c.users++
	return c.http
}

// letGo gives back a client of base taken with client; the last user's
// letGo closes its idle connections (none is in use by then) and drops it.
func (p *FetchPool) letGo(base string, files tlsconf.ClientConfig) {
	p.mu.Lock()
	g := p.shareLocked(gatewayAddress(base))
	c := g.transports[files]
	if c == nil {
		p.mu.Unlock()
		return
	}
	c.users--
	last := c.users == 0
	if last {
		delete(g.transports, files)
	}
	p.mu.Unlock()
	if last {
		c.http.CloseIdleConnections()
	}
}

// fairSlots are the fetch slots of one gateway address: at most max
// held, handed to the users (consumers) waiting, the one holding fewest
// first (in turn among equals), and to each user's waiting fetches in
// order. Invariant (after every
// method): either every slot is held or no waiting user may take one
// (each is at its own bound).
type fairSlots struct {
	mu   sync.Mutex
	max  int
	held int
	turn []*slotUser // the users with fetches waiting, the next to be served first
}

func newFairSlots(max int) *fairSlots { return &fairSlots{max: max} }

// slotUser is one consumer's account at one gateway's slots; its fields
// are guarded by the slots' mutex.
type slotUser struct {
	max     int        // its own bound (Config.GatewayFetchesMax)
	held    int        // slots it holds
	waiting *list.List // of *slotWaiter, first come first
	inTurn  bool       // in the slots' turn
}

func newSlotUser(max int) *slotUser { return &slotUser{max: max, waiting: list.New()} }

type slotWaiter struct {
	ready   chan struct{} // closed when granted
	granted bool
}

// acquire takes a slot for u, waiting its turn while ctx lives. It never
// returns with a slot once ctx has ended (a stopped fetch begins nothing).
func (s *fairSlots) acquire(ctx context.Context, u *slotUser) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.held < s.max && u.held < u.max && u.waiting.Len() == 0 {
		s.held++
		u.held++
		s.mu.Unlock()
		return nil
	}
	w := &slotWaiter{ready: make(chan struct{})}
	e := u.waiting.PushBack(w)
	if !u.inTurn {
		u.inTurn = true
		s.turn = append(s.turn, u)
	}
	s.mu.Unlock()
	select {
	case <-w.ready:
		if ctx.Err() == nil {
			return nil
		}
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.granted {
		s.releaseLocked(u)
	} else {
		u.waiting.Remove(e)
		if u.waiting.Len() == 0 {
			s.leaveTurnLocked(u)
		}
	}
	return ctx.Err()
}

// release gives back a slot u holds.
func (s *fairSlots) release(u *slotUser) {
	s.mu.Lock()
	s.releaseLocked(u)
	s.mu.Unlock()
}

func (s *fairSlots) releaseLocked(u *slotUser) {
	s.held--
	u.held--
	s.grantLocked()
}

// grantLocked hands free slots to the waiting users: the one holding
// fewest (the first in turn among those) and under its own bound takes
// one for its first fetch and goes to the back of the turn (or leaves
// it, with nothing more waiting). A consumer whose one partition waits
// is served before one that has hundreds in flight already.
func (s *fairSlots) grantLocked() {
	for s.held < s.max {
		i := -1
		for j, u := range s.turn {
			if u.held < u.max && (i < 0 || u.held < s.turn[i].held) {
				i = j
			}
		}
		if i < 0 {
			return
		}
		u := s.turn[i]
		w := u.waiting.Remove(u.waiting.Front()).(*slotWaiter)
		w.granted = true
		close(w.ready)
		s.held++
		u.held++
		s.turn = slices.Delete(s.turn, i, i+1)
		if u.waiting.Len() > 0 {
			s.turn = append(s.turn, u)
		} else {
			u.inTurn = false
		}
	}
}

func (s *fairSlots) leaveTurnLocked(u *slotUser) {
	if i := slices.Index(s.turn, u); i >= 0 {
		s.turn = slices.Delete(s.turn, i, i+1)
	}
	u.inTurn = false
}
