package broker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// connPool holds up to bound fetch connections to one broker address. A
// Kafka broker answers one connection's requests strictly in order, so a
// long poll on one partition would hold up every other fetch sharing its
// connection; leasing a connection per in-flight fetch keeps them apart,
// and lets a cancelled long poll kill its own connection without failing
// anyone else's request. Each broker has two pools (brokerPools): one for
// fetches that do not wait at the broker, one for long polls.
type connPool struct {
	addr  string
	spec  *connSpec
	slots chan struct{} // one token per connection in use

	mu     sync.Mutex
	idle   []*fetchConn // LIFO, so sequential fetches reuse a warm connection
	live   map[*fetchConn]struct{}
	closed bool
}

// idleTimeout closes a pooled connection unused this long: well inside a
// broker's connections.max.idle.ms (10 min by default), so a pooled
// connection is seldom one the broker already closed.
const idleTimeout = time.Minute

// errNoSlot is a lease that waited as long as it was allowed to.
var errNoSlot = errors.New("broker: no fetch connection free in time")

func newConnPool(addr string, bound int, spec *connSpec) *connPool {
	return &connPool{addr: addr, spec: spec, slots: make(chan struct{}, bound), live: make(map[*fetchConn]struct{})}
}

// acquire leases a connection, waiting for a free slot within ctx and,
// when giveUp is not nil, until it fires (errNoSlot). reused reports a
// pooled connection rather than a new one.
func (p *connPool) acquire(ctx context.Context, giveUp <-chan time.Time) (fc *fetchConn, reused bool, err error) {
	select {
	case p.slots <- struct{}{}:
	default:
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-giveUp:
			return nil, false, errNoSlot
		}
	}
	if fc = p.takeIdle(time.Now()); fc != nil {
		return fc, true, nil
	}
	fc, err = p.dial(ctx)
	if err != nil {
		<-p.slots
		return nil, false, err
	}
	return fc, false, nil
}

// takeIdle pops the warmest idle connection, closing expired ones.
func (p *connPool) takeIdle(now time.Time) *fetchConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for n := len(p.idle); n > 0; n = len(p.idle) {
		fc := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		if !fc.expired(now, idleTimeout) {
			return fc
		}
		delete(p.live, fc)
		fc.close()
	}
	return nil
}

// dial opens a connection for a slot already taken.
func (p *connPool) dial(ctx context.Context) (*fetchConn, error) {
	fc, err := p.spec.dial(ctx, p.addr)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		fc.close()
		return nil, ErrClosed
	}
	p.live[fc] = struct{}{}
	return fc, nil
}

// replace closes fc, whose exchange failed, and dials a new connection in
// its slot.
func (p *connPool) replace(ctx context.Context, fc *fetchConn) (*fetchConn, error) {
	p.drop(fc)
	fresh, err := p.dial(ctx)
	if err != nil {
		<-p.slots
		return nil, err
	}
	return fresh, nil
}

// release returns a leased connection; a connection whose exchange
// failed or was interrupted (ok false) is closed instead.
func (p *connPool) release(fc *fetchConn, ok bool) {
	if !ok {
		p.drop(fc)
		<-p.slots
		return
	}
	now := time.Now()
	fc.idleSince = now
	p.mu.Lock()
	if p.closed { // close already closed it
		p.mu.Unlock()
		<-p.slots
		return
	}
	p.idle = append(p.idle, fc)
	// The coldest connection is at the bottom: reap it once it idled
	// too long, one per release, so a burst's extra sockets go away.
	var cold *fetchConn
	if oldest := p.idle[0]; len(p.idle) > 1 && now.Sub(oldest.idleSince) > idleTimeout {
		cold = oldest
		p.idle = append(p.idle[:0], p.idle[1:]...)
		delete(p.live, cold)
	}
	p.mu.Unlock()
	if cold != nil {
		cold.close()
	}
	<-p.slots
}

func (p *connPool) drop(fc *fetchConn) {
	fc.close()
	p.mu.Lock()
	delete(p.live, fc)
	p.mu.Unlock()
}

// close closes every connection, failing the fetches in flight on them.
func (p *connPool) close() {
	p.mu.Lock()
	live := p.live
	p.live, p.idle, p.closed = nil, nil, true
	p.mu.Unlock()
	for fc := range live {
		fc.close()
	}
}

// brokerPools are one broker's two pools: fetches that do not wait at the
// broker (MaxWait 0: a slot is held for one round trip) and long polls
// (held up to MaxWait). A long poll never holds a slot the others need,
// so no number of waiting polls delays a fetch of data that is there.
type brokerPools struct {
	short, long *connPool
	merge       *merger // nil: fetches never merge
}

// pools maps broker addresses to their connection pools. There is one
// pair per address that ever led a fetched partition; idle connections
// are closed after idleTimeout, so a retired address costs two empty
// pools, not sockets.
type pools struct {
	shortBound, longBound int
	spec                  *connSpec
	mergeAfter            int           // Config.MergeFetchesAfter
	mergeWait             time.Duration // Config.MergeWaitMax
	mergeStats            *MergeStats   // shared by every broker's merger
	mergeQueued           func()        // tests: runs when a fetch queues to merge

	// byAddr is replaced, never modified, under mu: every fetch reads
	// it, a new broker address is rare. nil once closed.
	byAddr atomic.Pointer[map[string]*brokerPools]
	mu     sync.Mutex
}

func newPools(shortBound, longBound int, spec *connSpec) *pools {
	ps := &pools{shortBound: shortBound, longBound: longBound, spec: spec}
	ps.byAddr.Store(&map[string]*brokerPools{})
	return ps
}

func (ps *pools) get(addr string) (*brokerPools, error) {
	if m := ps.byAddr.Load(); m == nil {
		return nil, ErrClosed
	} else if bp := (*m)[addr]; bp != nil {
		return bp, nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	old := ps.byAddr.Load()
	if old == nil {
		return nil, ErrClosed
	}
	if bp := (*old)[addr]; bp != nil {
		return bp, nil
	}
	next := make(map[string]*brokerPools, len(*old)+1)
	for k, v := range *old {
		next[k] = v
	}
	bp := &brokerPools{short: newConnPool(addr, ps.shortBound, ps.spec), long: newConnPool(addr, ps.longBound, ps.spec)}
	if ps.mergeAfter > 0 {
		bp.merge = newMerger(ps.mergeAfter, ps.mergeWait, ps.mergeStats)
		bp.merge.queued = ps.mergeQueued
	}
	next[addr] = bp
	ps.byAddr.Store(&next)
	return bp, nil
}

func (ps *pools) close() {
	ps.mu.Lock()
	all := ps.byAddr.Swap(nil)
	ps.mu.Unlock()
	if all == nil {
		return
	}
	for _, bp := range *all {
		bp.short.close()
		bp.long.close()
	}
}
