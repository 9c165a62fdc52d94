// Package answerheldtest makes a server hold answers for the servers'
// tests: requests sent on connections that read nothing past the status
// line.
package answerheldtest

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// Unread sends the raw request to addr on a connection with a tiny
// receive window, reads the answer's status line and headers, and
// leaves the body unread until close is called or the test ends. A
// status other than 200 fails the test, naming the start of its body.
func Unread(t testing.TB, addr, request string) (resp *http.Response, close func()) {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err = http.ReadResponse(bufio.NewReaderSize(conn, 16), nil)
	if err != nil {
		t.Fatalf("status of an unread answer: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		t.Fatalf("unread answer: %s %s", resp.Status, body)
	}
	return resp, func() { conn.Close() }
}

// SmallSendBuffers hands out connections whose kernel send buffer is
// small, so that an answer a client does not read stays in the server's
// memory rather than in the sockets' buffers (megabytes on loopback).
type SmallSendBuffers struct{ net.Listener }

func (l SmallSendBuffers) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if tcp, ok := conn.(*net.TCPConn); ok {
		tcp.SetWriteBuffer(4096)
	}
	return conn, err
}

// LiveHeap is the heap in use after a collection.
func LiveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
