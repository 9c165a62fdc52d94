package kafkaproto

import (
	"syscall"
	"testing"
)

// TestSendBufferIsBounded is redteam19's recommendation 2: an answer the
// kernel's send buffer took whole was never counted among the answers
// held, and Linux grows a connection's buffer to tcp_wmem's maximum (4 MB
// by default). With SendBufferBytes each accepted connection's SO_SNDBUF
// is the setting (Linux reports it doubled); without it, the system's.
// Fails without sendBufferListener (the system's 16 KiB or more, not the
// 8 KiB asked for; TestUnreadMetadataAnswersAreBounded shows what it
// holds: with the system's buffers the unread answers are taken whole).
func TestSendBufferIsBounded(t *testing.T) {
	cfg := testConfig()
	cfg.SendBufferBytes = 8 << 10
	s := startListener(t, cfg, anyClient{}, nil)
	r := dialAuthenticated(t, s, "credential")
	c := serverConn(t, s, r.nc.LocalAddr().String())
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		t.Fatalf("the listener's connection is a %T, not a socket", c.nc)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var size int
	var sockErr error
	if err := rc.Control(func(fd uintptr) {
		size, sockErr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
	}); err != nil || sockErr != nil {
		t.Fatal(err, sockErr)
	}
	if size > 2*cfg.SendBufferBytes {
		t.Errorf("a connection's send buffer is %d bytes, want at most twice kafka_send_buffer_bytes (%d)", size, cfg.SendBufferBytes)
	}
	bad := testConfig()
	bad.SendBufferBytes = 100
	if err := bad.Validate(); err == nil {
		t.Error("kafka_send_buffer_bytes 100 validated, want refused (below the minimum)")
	}
}

// serverConn finds s's end of the connection whose client end is local
// (its nc and fields set before it was registered only).
func serverConn(t *testing.T, s *Server, local string) *conn {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.nc.RemoteAddr().String() == local {
			return c
		}
	}
	t.Fatalf("no connection from %s", local)
	return nil
}
