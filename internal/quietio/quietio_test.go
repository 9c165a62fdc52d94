//go:build linux

package quietio

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pair returns a quiet server side and a plain client side of one
// loopback TCP connection, accepted through Listener.
func pair(t *testing.T) (*Conn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	qln := Listener(ln)
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := qln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	q, ok := sc.(*Conn)
	if !ok {
		t.Fatalf("accepted %T, want *quietio.Conn", sc)
	}
	t.Cleanup(func() { q.Close(); client.Close() })
	return q, client.(*net.TCPConn)
}

func TestRoundTripWholeAndInPieces(t *testing.T) {
	q, c := pair(t)
	if _, err := c.Write([]byte("hello, gateway")); err != nil {
		t.Fatal(err)
	}
	small := make([]byte, 5)
	var got []byte
	for len(got) < len("hello, gateway") {
		n, err := q.Read(small) // a buffer smaller than what is there: the rest stays for the next read
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, small[:n]...)
	}
	if string(got) != "hello, gateway" {
		t.Fatalf("read %q", got)
	}
	r := make(chan []byte)
	go func() {
		b := make([]byte, 8)
		n, _ := q.Read(b) // nothing there yet: waits on the poller
		r <- b[:n]
	}()
	c.Write([]byte("more"))
	if b := <-r; string(b) != "more" {
		t.Fatalf("read %q after a wait", b)
	}
	if n, err := q.Write([]byte("answer")); n != 6 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	buf := make([]byte, 16)
	n, err := io.ReadAtLeast(c, buf, 6)
	if err != nil || string(buf[:n]) != "answer" {
		t.Fatalf("client read %q, %v", buf[:n], err)
	}
	if n, err := q.Read(nil); n != 0 || err != nil {
		t.Fatalf("empty read: %d, %v", n, err)
	}
	if n, err := q.Write(nil); n != 0 || err != nil {
		t.Fatalf("empty write: %d, %v", n, err)
	}
}

// A write larger than the socket buffers fills them, waits on the poller
// (EAGAIN) and goes on as the peer reads: every byte arrives, in order.
// The peer starts reading only once the write went to wait (the hook),
// so the wait is certain, not a matter of who runs faster.
func TestLargeWriteWaitsForThePeer(t *testing.T) {
	q, c := pair(t)
	waiting := make(chan struct{})
	var once sync.Once
	q.waitHook = func(write bool) {
		if write {
			once.Do(func() { close(waiting) })
		}
	}
	want := make([]byte, 64<<20) // more than loopback's socket buffers hold (at most 4 + 6 MiB by default)
	rand.Read(want)
	done := make(chan error, 1)
	go func() {
		n, err := q.Write(want)
		if err == nil && n != len(want) {
			err = errors.New("short write without an error")
		}
		done <- err
	}()
	<-waiting // nobody reads yet: the buffers fill and the write waits
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
}

func TestEndOfStreamIsEOF(t *testing.T) {
	q, c := pair(t)
	if _, err := c.Write([]byte("last")); err != nil {
		t.Fatal(err)
	}
	c.CloseWrite()
	got, err := io.ReadAll(q) // ReadAll stops at io.EOF only
	if err != nil || string(got) != "last" {
		t.Fatalf("ReadAll: %q, %v", got, err)
	}
	if n, err := q.Read(make([]byte, 4)); n != 0 || err != io.EOF {
		t.Fatalf("read after the end: %d, %v", n, err)
	}
}

// Deadlines are the poller's: a read waiting for data ends with
// os.ErrDeadlineExceeded, a timeout net.Error named "read".
func TestReadDeadline(t *testing.T) {
	q, _ := pair(t)
	if err := q.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	n, err := q.Read(make([]byte, 8))
	var ne net.Error
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past its deadline: %d, %v", n, err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "read" || oe.Net != "tcp" || oe.Addr == nil {
		t.Fatalf("error %#v, want a net.OpError for read", err)
	}
	// The deadline lifted, the connection reads again.
	if err := q.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
}

// TestWriteDeadline: a write that fills the buffers waits, and fails at
// its deadline reporting what it wrote before. What that is comes from
// the write itself (the hook runs as it goes to wait, on its goroutine):
// part of it, or nothing when it began after its deadline or found no
// room at all — a loaded machine, once 1 run in 10–20 when this
// required part written.
func TestWriteDeadline(t *testing.T) {
	q, _ := pair(t) // the client never reads: the buffers fill
	waited := -1    // written when the write last went to wait
	q.waitHook = func(write bool) {
		if write {
			waited = q.wn
		}
	}
	if err := q.SetWriteDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 64<<20)
	n, err := q.Write(p)
	if !errors.Is(err, os.ErrDeadlineExceeded) || n >= len(p) || n != max(waited, 0) {
		t.Fatalf("write past its deadline: %d, %v (want the deadline, and the %d bytes written before it waited)", n, err, max(waited, 0))
	}
}

// Close from another goroutine ends a read waiting on the poller, or
// one not yet begun: either way the read fails with net.ErrClosed (many
// rounds, so both orders happen).
func TestCloseEndsARead(t *testing.T) {
	for range 100 {
		q, _ := pair(t)
		errc := make(chan error, 1)
		go func() {
			_, err := q.Read(make([]byte, 8))
			errc <- err
		}()
		q.Close()
		if err := <-errc; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read and Close: %v", err)
		}
		if _, err := q.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("write after Close: %v", err)
		}
	}
}

// A peer's reset fails the read with ECONNRESET and a write with EPIPE or
// ECONNRESET, as net does; the process does not die of SIGPIPE.
func TestPeerResetFailsReadAndWrite(t *testing.T) {
	q, c := pair(t)
	c.SetLinger(0)
	c.Close() // RST
	_, err := q.Read(make([]byte, 8))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after a reset: %v", err)
	}
	var werr error
	for i := 0; i < 10 && werr == nil; i++ {
		_, werr = q.Write([]byte("anyone there?"))
	}
	if !errors.Is(werr, syscall.EPIPE) && !errors.Is(werr, syscall.ECONNRESET) {
		t.Fatalf("write after a reset: %v", werr)
	}
	var oe *net.OpError
	if !errors.As(werr, &oe) || oe.Op != "write" {
		t.Fatalf("error %#v, want a net.OpError for write", werr)
	}
}

// One goroutine reads while another writes, as a server with a
// hang-up watch or a pipelining client does (run with -race).
func TestConcurrentReadAndWrite(t *testing.T) {
	q, c := pair(t)
	const n = 2000
	go func() {
		for i := 0; i < n; i++ {
			if _, err := q.Write([]byte{byte(i)}); err != nil {
				return
			}
		}
	}()
	go func() {
		for i := 0; i < n; i++ {
			c.Write([]byte{byte(i)})
		}
	}()
	got := make([]byte, n)
	if _, err := io.ReadFull(q, got); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, n)
	if _, err := io.ReadFull(c, back); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if got[i] != byte(i) || back[i] != byte(i) {
			t.Fatalf("byte %d: read %d, peer read %d", i, got[i], back[i])
		}
	}
}

// What the servers find below their wrappers stays reachable: the TCP
// connection (internal/linger) and its descriptor (internal/hangup).
func TestWrappersFindTheSocket(t *testing.T) {
	q, _ := pair(t)
	if _, ok := q.NetConn().(*net.TCPConn); !ok {
		t.Fatalf("NetConn is %T", q.NetConn())
	}
	var c net.Conn = q
	sc, ok := c.(syscall.Conn)
	if !ok {
		t.Fatal("no SyscallConn")
	}
	if _, err := sc.SyscallConn(); err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if Wrap(a) != a {
		t.Fatal("a connection that is no TCP socket must be returned as it is")
	}
}
