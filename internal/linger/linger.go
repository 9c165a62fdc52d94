// Package linger closes an HTTP connection after a request the server
// could not read whole the way net/http does (its "lingering close"), for
// the fasthttp servers of the coordinator and the gateway.
//
// Behavior: when a server answers a request it could not read whole (body
// over max_body_bytes, headers over max_header_bytes, malformed HTTP) and
// closes the connection, the socket stays open a little longer through a
// duplicate of its descriptor: what the client is still sending is read
// and dropped for up to Timeout and MaxBytes, then the duplicate closes
// too. Closing a socket with unread data sends a reset, which makes the
// client's kernel drop the answer it has not read yet: clients that send
// the whole body before reading (Go's net/http) got "connection reset by
// peer" instead of the documented 413 / 431. At most MaxConns connections
// linger at once; beyond, they close at once as before.
//
// Why a duplicate descriptor and not a net.Conn wrapper whose Close
// lingers: the descriptor is found below whatever wraps the connection
// (TLS, internal/crlf: both have NetConn), and the lingering then needs
// nothing from the wrappers or the server.
package linger

import (
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

const (
	// Timeout bounds how long a refused request's rest is read.
	Timeout = time.Second
	// MaxBytes bounds how much of it is read.
	MaxBytes = 16 << 20
	// MaxConns bounds how many connections linger at once.
	MaxConns = 256
)

var lingering atomic.Int64

// Lingering is the number of connections lingering now.
func Lingering() int64 { return lingering.Load() }

// OnClose makes the connection of ctx (the TCP one below TLS and
// internal/crlf, unwrapped through their NetConn methods) linger once
// the server closes it: call it from the server's ErrorHandler before
// answering a request whose rest is still coming. It returns at once; the
// reading happens on a goroutine of its own.
func OnClose(ctx *fasthttp.RequestCtx) {
	conn := ctx.Conn()
	for {
		u, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		conn = u.NetConn()
	}
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return
	}
	if lingering.Load() >= MaxConns {
		return // Drain would refuse it: no duplicate made
	}
	dup, err := duplicate(tc)
	if err != nil {
		return
	}
	if !Drain(dup, Timeout, MaxBytes) {
		dup.Close()
	}
}

// Drain reads and drops what c's peer still sends, for up to timeout and
// maxBytes, on a goroutine of its own, then closes c; false (c left to
// the caller) when MaxConns connections linger already. OnClose and a
// connection refused at accept (internal/connguard) share the bound.
func Drain(c net.Conn, timeout time.Duration, maxBytes int64) bool {
	if lingering.Add(1) > MaxConns {
		lingering.Add(-1)
		return false
	}
	go func() {
		defer lingering.Add(-1)
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(timeout))
		_, _ = io.CopyN(io.Discard, c, maxBytes)
	}()
	return true
}

// duplicate is a second connection on tc's socket (a duplicate
// descriptor, in the runtime's poller): the socket closes when both are
// closed.
func duplicate(tc *net.TCPConn) (net.Conn, error) {
	f, err := tc.File()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return net.FileConn(f)
}
