package coordinator_test

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestIdleConnectionClosedSilently: a connection that sends nothing within
// read_timeout is closed without a response (no unsolicited 400 on a
// client's pre-dialed idle connection).
func TestIdleConnectionClosedSilently(t *testing.T) {
	e := newEnv(t, map[string]int32{"t": 1})
	e.cfg.ReadTimeout = 300 * time.Millisecond
	h := e.start(t)
	conn, err := net.Dial("tcp", h.c.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(6 * time.Second))
	got, err := io.ReadAll(conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("connection still open long after read_timeout")
	}
	if len(got) != 0 {
		t.Fatalf("idle connection got %q", got)
	}
}
