package gateway

import (
	"bufio"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestConnectionsAreBounded: a client holding max_connections idle
// keep-alive connections gets its next one answered 503 and closed,
// instead of the gateway holding a goroutine and buffers for each
// connection it can open; once one of them goes, a new connection is
// served.
func TestConnectionsAreBounded(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{edit: func(c *Config) { c.MaxConnections = 2 }})
	h.waitReady()
	// open dials, asks /healthz and returns the connection, kept alive,
	// with the answer's status code.
	open := func() (net.Conn, int) {
		conn, err := net.Dial("tcp", h.gw.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")); err != nil {
			return conn, 0
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return conn, 0
		}
		resp.Body.Close()
		return conn, resp.StatusCode
	}
	first, s1 := open()
	_, s2 := open()
	if s1 != 200 || s2 != 200 {
		t.Fatalf("the first two connections: %d, %d", s1, s2)
	}
	third, s3 := open()
	if s3 != 503 {
		t.Fatalf("a third connection beyond max_connections 2: %d, want 503", s3)
	}
	if _, err := third.Read(make([]byte, 1)); err == nil {
		t.Fatal("the refused connection stayed open")
	}
	first.Close()
	waitFor(t, "a connection served again once one went", func() bool {
		_, s := open()
		return s == 200
	})
}
