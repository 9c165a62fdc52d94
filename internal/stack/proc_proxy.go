package stack

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
)

// Proxy is a TCP proxy on 127.0.0.1 that a test can blackhole: while
// blackholed, bytes in either direction are swallowed, closes are not
// passed on, and new connections are accepted but lead nowhere — the
// peers see a network that went silent, not a refusal. Heal ends it and
// closes every connection that lost bytes (as TCP would eventually reset
// them); connections that stayed idle go on. Safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu         sync.Mutex
	blackholed bool
	closed     bool
	conns      map[*proxyConn]bool
}

type proxyConn struct {
	client   net.Conn
	upstream net.Conn // nil when accepted while blackholed
	damaged  atomic.Bool
}

func (c *proxyConn) close() {
	_ = c.client.Close()
	if c.upstream != nil {
		_ = c.upstream.Close()
	}
}

// StartProxy listens on 127.0.0.1:0 and forwards to target (host:port).
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("stack: proxy: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[*proxyConn]bool{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is http://Addr.
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// Blackhole makes the network between the two sides silent.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	p.blackholed = true
	p.mu.Unlock()
}

// Heal ends the blackhole; connections that lost bytes are closed.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.blackholed = false
	var broken []*proxyConn
	for c := range p.conns {
		if c.damaged.Load() || c.upstream == nil {
			broken = append(broken, c)
			delete(p.conns, c)
		}
	}
	p.mu.Unlock()
	for _, c := range broken {
		c.close()
	}
}

// Blackholed reports whether the proxy swallows traffic now.
func (p *Proxy) Blackholed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blackholed
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = map[*proxyConn]bool{}
	p.mu.Unlock()
	_ = p.ln.Close()
	for c := range conns {
		c.close()
	}
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		c := &proxyConn{client: client}
		p.mu.Lock()
		hole, closed := p.blackholed, p.closed
		p.mu.Unlock()
		if closed {
			_ = client.Close()
			return
		}
		if !hole {
			if c.upstream, err = net.Dial("tcp", p.target); err != nil {
				_ = client.Close()
				continue
			}
		}
		p.mu.Lock()
		p.conns[c] = true
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, c.client, c.upstream)
		go p.pipe(c, c.upstream, c.client)
	}
}

// pipe copies src to dst while the proxy is not blackholed.
func (p *Proxy) pipe(c *proxyConn, src, dst net.Conn) {
	defer p.wg.Done()
	if src == nil { // accepted into the blackhole: nothing upstream
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if p.Blackholed() || dst == nil {
				c.damaged.Store(true)
			} else if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			// In the blackhole the other side learns nothing; Heal or
			// Close cleans up.
			if !p.Blackholed() && !c.damaged.Load() && dst != nil {
				p.forget(c)
				c.close()
			}
			return
		}
	}
}

func (p *Proxy) forget(c *proxyConn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}
