//go:build linux

// Package quietio reads and writes a server's TCP connections without
// waking the Go runtime's monitor thread on every request.
//
// Behavior: Listener wraps a listener whose accepted *net.TCPConn are
// read and written with raw read(2) and write(2) calls on their
// non-blocking descriptors (syscall.RawSyscall, through the connection's
// syscall.RawConn), waiting on Go's network poller exactly as net does
// when a call would block: Close and every other method are the
// connection's own; deadlines are obeyed as net obeys them but reach the
// poller only when they come nearer (deadline.go). Nothing about what
// is read or written changes.
//
// Why: a Go process that went idle parks its monitor thread (sysmon);
// the next system call made the standard way (entersyscall) wakes it, and
// it then polls every 20 µs until the process is idle again. A server
// answering one request at a time pays that on every request: measured
// on the gateway, the monitor thread took 0.8 context switches and
// ~15% of the gateway's CPU per 1-record fetch one at a time (perf stat
// --per-thread; BENCHMARKS.md §0). read and write on a non-blocking
// socket never block, which is what RawSyscall is for; the poller wait
// in between is the runtime's own. Written by hand because neither net
// nor golang.org/x/sys offers a socket read that skips entersyscall.
//
// What the runtime no longer sees: a call in progress keeps its P and
// cannot be preempted, so a stop-the-world (GC) or another goroutine of
// that P waits for it — for one copy into or out of the socket buffer
// (at most its size, a few MiB: well under a millisecond), as for any
// Go code copying that much. Other system calls (files, logs, DNS), a
// GC and the next timer still wake the monitor, so it keeps its other
// duties (preempting a goroutine that runs for 10 ms, retaking the P of
// a blocking call) whenever the process does more than socket I/O.
package quietio

import (
	"io"
	"net"
	"os"
	"syscall"
)

// maxRW bounds one read or write call, as internal/poll does (1 GiB).
const maxRW = 1 << 30

// Listener returns ln whose accepted TCP connections are quiet (Conn);
// any other connection is returned as accepted.
func Listener(ln net.Listener) net.Listener { return listener{ln} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Wrap(c), nil
}

// Wrap returns c as a *Conn when it is a *net.TCPConn, else c.
func Wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	q := &Conn{TCPConn: tc, rc: rc}
	q.readFD, q.writeFD = q.read, q.write // bound once: no allocation per call
	q.rd.init()
	q.wd.init()
	return q
}

// Conn is a TCP connection read and written with raw system calls (see
// the package doc). Like a net.Conn, one Read and one Write may run at
// once; not two of either.
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn

	readFD, writeFD func(uintptr) bool
	rp, wp          []byte
	rn, wn          int
	rerr, werr      syscall.Errno
	waitHook        func(write bool) // tests: called as a read or write goes to wait on the poller
	rd, wd          deadline         // set lazily (deadline.go)
}

// NetConn is the TCP connection (internal/linger unwraps through it).
func (c *Conn) NetConn() net.Conn { return c.TCPConn }

// Read reads as (*net.TCPConn).Read does: io.EOF at the end of the
// stream, the poller's errors (deadline, closed) as they are.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(p) > maxRW {
		p = p[:maxRW]
	}
	c.rp, c.rn, c.rerr = p, 0, 0
	err := c.rc.Read(c.readFD)
	for err != nil && c.rd.expired(err, c.TCPConn.SetReadDeadline) {
		err = c.rc.Read(c.readFD) // an earlier deadline than the one set last passed
	}
	n, errno := c.rn, c.rerr
	c.rp = nil
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case errno != 0:
		return 0, c.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *Conn) read(fd uintptr) bool {
	for {
		n, errno := sysRead(fd, c.rp)
		switch errno {
		case 0:
			c.rn = n
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			if c.waitHook != nil {
				c.waitHook(false)
			}
			return false // wait until readable
		default:
			c.rerr = errno
			return true
		}
	}
}

// Write writes all of p, or fails as (*net.TCPConn).Write does.
func (c *Conn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.wp, c.wn, c.werr = p, 0, 0
	err := c.rc.Write(c.writeFD)
	for err != nil && c.wd.expired(err, c.TCPConn.SetWriteDeadline) {
		err = c.rc.Write(c.writeFD) // goes on from c.wn
	}
	n, errno := c.wn, c.werr
	c.wp = nil
	switch {
	case err != nil:
		return n, c.opError("write", err)
	case errno != 0:
		return n, c.opError("write", os.NewSyscallError("write", errno))
	}
	return n, nil
}

// WriteBuffers writes b with writev as (*net.TCPConn) does, obeying the
// write deadline set last. net.Buffers.WriteTo(c) would not: it finds
// the embedded *net.TCPConn's writev and waits on the poller's deadline
// alone, which is an earlier one when a later one was only recorded
// (deadline) — a Kafka listener connection's Fetch answer then failed
// write_timeout after the first armed write deadline, and the listener
// closed the connection. b is consumed as it is written.
func (c *Conn) WriteBuffers(b *net.Buffers) (int64, error) {
	var total int64
	for {
		n, err := b.WriteTo(c.TCPConn)
		total += n
		if err == nil || !c.wd.expired(err, c.TCPConn.SetWriteDeadline) {
			return total, err
		}
	}
}

// ReadFrom copies r to c through c.Write, so every write obeys the write
// deadline set last (deadline.go). The embedded *net.TCPConn's ReadFrom
// (splice, sendfile, or a copy through its own Write) waits on the
// poller's deadline alone, an earlier one when a later one was only
// recorded, and failed "i/o timeout" on a connection older than its
// first armed write deadline — as net.Buffers' writev did (WriteBuffers).
// No caller reaches it today (fasthttp copies the gateway's body streams
// through their WriteTo, into Write), but bufio.Writer.ReadFrom and
// io.Copy find it: closed here before one does. Retrying it as
// WriteBuffers does would lose what it had read from r and not written.
// Nothing here serves files, so sendfile and splice are not missed.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) { return io.Copy(writerOnly{c}, r) }

// WriteTo copies c to w through c.Read, obeying the read deadline set
// last (as ReadFrom, for the embedded connection's WriteTo).
func (c *Conn) WriteTo(w io.Writer) (int64, error) { return io.Copy(w, readerOnly{c}) }

// writerOnly and readerOnly hide c's ReadFrom and WriteTo from io.Copy,
// which would call them again.
type (
	writerOnly struct{ io.Writer }
	readerOnly struct{ io.Reader }
)

func (c *Conn) write(fd uintptr) bool {
	for c.wn < len(c.wp) {
		b := c.wp[c.wn:]
		if len(b) > maxRW {
			b = b[:maxRW]
		}
		n, errno := sysWrite(fd, b)
		switch errno {
		case 0:
			c.wn += n
		case syscall.EINTR:
		case syscall.EAGAIN:
			if c.waitHook != nil {
				c.waitHook(true)
			}
			return false // wait until writable
		default:
			c.werr = errno
			return true
		}
	}
	return true
}

// opError names the operation as net does ("read", not the raw
// connection's "raw-read"), keeping the error below (os.ErrDeadlineExceeded,
// net.ErrClosed) for errors.Is.
func (c *Conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
