//go:build unix

package gateway

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
	"time"
)

// watchHangup watches the client connection of a long poll and calls gone
// once the client closed it (EOF) or reset it. fasthttp does not look at
// a connection while its handler runs, so without this a long poll whose
// client left would hold its broker connection until max_wait. stop ends
// the watch and returns once it has ended; call it before the handler
// returns, as fasthttp then reads the connection again (and sets its own
// read deadline first).
//
// The watch peeks (MSG_PEEK) at the socket when it becomes readable, so
// it consumes nothing: a pipelined next request stays for fasthttp, and
// ends the watch (the client is there). A hangup on a TLS connection is
// seen at the TCP level; a close_notify alert reads as data.
func watchHangup(conn net.Conn, gone func()) (stop func()) {
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
