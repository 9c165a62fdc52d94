package stack_test

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/stack"
)

// echoServer echoes every connection on 127.0.0.1.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn, msg string) error {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err := io.ReadFull(c, buf)
	if err == nil && string(buf) != msg {
		t.Fatalf("echoed %q, want %q", buf, msg)
	}
	return err
}

func TestProxyBlackholeAndHeal(t *testing.T) {
	p, err := stack.StartProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(t, c, "before"); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}

	p.Blackhole()
	// Silence, not a refusal: the bytes vanish, the connection stays open,
	// and a new connection is accepted but leads nowhere.
	if err := roundTrip(t, c, "lost"); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("in the blackhole: %v, want a read timeout", err)
	}
	fresh, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("dial into the blackhole: %v", err)
	}
	defer fresh.Close()
	if err := roundTrip(t, fresh, "nowhere"); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("new connection in the blackhole: %v, want a read timeout", err)
	}

	p.Heal()
	// Connections that lost bytes are closed, as TCP would reset them.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("damaged connection after the heal: %v, want closed", err)
	}
	again, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if err := roundTrip(t, again, "after"); err != nil {
		t.Fatalf("after the heal: %v", err)
	}
}
