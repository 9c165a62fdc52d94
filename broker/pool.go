package broker

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchConn is one leased fetch connection to one broker: a kgo client
// seeded with only that broker, so it never loads metadata and its single
// fetch connection is ours alone for the lease. kgo still negotiates API
// versions, TLS and SASL when it dials.
type fetchConn struct {
	client *kgo.Client
	broker *kgo.Broker
}

// connPool holds up to bound fetch connections to one broker address. A
// Kafka broker answers one connection's requests strictly in order, so a
// long poll on one partition would hold up every other fetch sharing its
// connection; leasing a connection per in-flight fetch keeps them apart,
// and lets a cancelled long poll kill its own connection without failing
// anyone else's request.
type connPool struct {
	addr  string
	opts  []kgo.Opt
	slots chan struct{} // one token per connection in use

	mu     sync.Mutex
	idle   []*fetchConn // LIFO, so sequential fetches reuse a warm connection
	live   map[*fetchConn]struct{}
	closed bool
}

func newConnPool(addr string, bound int, opts []kgo.Opt) *connPool {
	return &connPool{addr: addr, opts: opts, slots: make(chan struct{}, bound), live: make(map[*fetchConn]struct{})}
}

// acquire leases a connection, waiting for a free slot within ctx.
func (p *connPool) acquire(ctx context.Context) (*fetchConn, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.slots
		return nil, ErrClosed
	}
	if n := len(p.idle); n > 0 {
		fc := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return fc, nil
	}
	p.mu.Unlock()
	fc, err := p.dial()
	if err != nil {
		<-p.slots
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		fc.client.Close()
		<-p.slots
		return nil, ErrClosed
	}
	p.live[fc] = struct{}{}
	return fc, nil
}

func (p *connPool) dial() (*fetchConn, error) {
	opts := append(append([]kgo.Opt(nil), p.opts...), kgo.SeedBrokers(p.addr))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	seeds := cl.SeedBrokers()
	return &fetchConn{client: cl, broker: seeds[0]}, nil
}

// release returns a leased connection. A connection whose request was
// cancelled is still fine to reuse: kgo dials a fresh socket for it.
func (p *connPool) release(fc *fetchConn) {
	p.mu.Lock()
	if !p.closed { // else close already closed it
		p.idle = append(p.idle, fc)
	}
	p.mu.Unlock()
	<-p.slots
}

// close closes every connection, failing the fetches in flight on them
// with kgo.ErrClientClosed.
func (p *connPool) close() {
	p.mu.Lock()
	live := p.live
	p.live, p.idle, p.closed = nil, nil, true
	p.mu.Unlock()
	for fc := range live {
		fc.client.Close()
	}
}

// pools maps broker addresses to their connection pools. There is one pool
// per address ever led a fetched partition; idle sockets inside are reaped
// by kgo after its idle timeout (20 s), so a retired address costs an idle
// client object, not a socket.
type pools struct {
	bound int
	opts  []kgo.Opt

	mu     sync.Mutex
	byAddr map[string]*connPool
	closed bool
}

func (ps *pools) get(addr string) (*connPool, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return nil, ErrClosed
	}
	p := ps.byAddr[addr]
	if p == nil {
		p = newConnPool(addr, ps.bound, ps.opts)
		ps.byAddr[addr] = p
	}
	return p, nil
}

func (ps *pools) close() {
	ps.mu.Lock()
	all := ps.byAddr
	ps.byAddr = nil
	ps.closed = true
	ps.mu.Unlock()
	for _, p := range all {
		p.close()
	}
}
