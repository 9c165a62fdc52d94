package gateway

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestIdleConnectionClosedSilently: a connection that sends nothing is
// closed after read_timeout without a response (Go's HTTP client keeps
// pre-dialed idle connections and logs an "unsolicited response" for any
// bytes on them).
func TestIdleConnectionClosedSilently(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ReadTimeout = 300 * time.Millisecond })
	idleConnectionClosedSilently(t, h.gw.Addr(), 300*time.Millisecond)
}

func idleConnectionClosedSilently(t *testing.T, addr string, readTimeout time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(20 * readTimeout))
	got, err := io.ReadAll(conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open after %v", 20*readTimeout)
	}
	if len(got) != 0 {
		t.Fatalf("idle connection got %q", got)
	}
}
