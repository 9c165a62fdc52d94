//go:build unix

// Package hangup tells a server that the client of a connection it is
// not reading (a handler running, a response streaming) went away: the
// gateway's long polls and the console's event streams end at once
// instead of holding their resources until a deadline or a failed write.
package hangup

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
	"time"
)

// Watch watches the client connection of a long poll (or a stream) and
// calls gone once the client closed it (EOF) or reset it. fasthttp does
// not look at a connection while its handler runs, so without this a long
// poll whose client left would hold its broker connection until max_wait.
// A conn that is no socket (nil, a test's) is not watched. stop ends
// the watch and returns once it has ended; call it before the handler
// returns, as fasthttp then reads the connection again (and sets its own
// read deadline first).
//
// The watch peeks (MSG_PEEK) at the socket when it becomes readable, so
// it consumes nothing: a pipelined next request stays for fasthttp, and
// ends the watch (the client is there). A hangup on a TLS connection is
// seen at the TCP level; a close_notify alert reads as data.
func Watch(conn net.Conn, gone func()) (stop func()) {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return func() {}
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		hungUp := false
		err := raw.Read(func(fd uintptr) bool {
			var b [1]byte
			for {
				n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
				switch {
				case errors.Is(err, syscall.EINTR):
					continue
				case errors.Is(err, syscall.EAGAIN):
					return false // nothing yet: wait until readable
				case err != nil || n == 0:
					hungUp = true // reset, or end of stream
				}
				return true
			}
		})
		if hungUp && err == nil {
			gone()
		}
	}()
	return func() {
		_ = conn.SetReadDeadline(time.Unix(1, 0)) // wakes the watch
		<-done
	}
}
