package coordinator

import (
	"crypto/tls"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Behavior: a connection the coordinator closes right after answering a
// request it could not read whole (body over max_body_bytes, headers over
// max_header_bytes, malformed HTTP) is closed the way net/http closes it
// (its "lingering close"): the write side first (FIN after the answer),
// then what the client is still sending is read and dropped for up to
// lingerTimeout and lingerBytes, then the socket closes. Closing a socket
// with unread data sends a reset, which makes the client's kernel drop
// the answer it has not read yet: clients that send the whole body before
// reading (Go's net/http) got "connection reset by peer" instead of the
// documented 413 / 431. At most lingerConnsMax connections linger at
// once; beyond, they close at once as before.

const (
	lingerTimeout  = time.Second
	lingerBytes    = 16 << 20
	lingerConnsMax = 256
)

// lingerListener wraps the coordinator's TCP listener (under TLS).
type lingerListener struct {
	net.Listener
	lingering *atomic.Int64
}

func lingering(ln net.Listener) net.Listener {
	return lingerListener{Listener: ln, lingering: new(atomic.Int64)}
}

func (l lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &lingerConn{Conn: c, lingering: l.lingering}, nil
}

type lingerConn struct {
	net.Conn
	lingering *atomic.Int64
	linger    atomic.Bool
	closed    atomic.Bool
}

// lingerOnClose marks the connection of ctx (under TLS, the TCP one
// below it) to linger when it is closed.
func lingerOnClose(ctx *fasthttp.RequestCtx) {
	conn := ctx.Conn()
	if t, ok := conn.(*tls.Conn); ok {
		conn = t.NetConn()
	}
	if l, ok := conn.(*lingerConn); ok {
		l.linger.Store(true)
	}
}

func (c *lingerConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	half, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok || !c.linger.Load() {
		return c.Conn.Close()
	}
	if c.lingering.Add(1) > lingerConnsMax || half.CloseWrite() != nil {
		c.lingering.Add(-1)
		return c.Conn.Close()
	}
	go func() {
		defer c.lingering.Add(-1)
		c.Conn.SetReadDeadline(time.Now().Add(lingerTimeout))
		io.CopyN(io.Discard, c.Conn, lingerBytes)
		c.Conn.Close()
	}()
	return nil
}
