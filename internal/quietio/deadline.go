//go:build linux

package quietio

import (
	"errors"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Deadlines are set on the poller only when they come nearer.
//
// Why: a keep-alive HTTP server sets three deadlines per request
// (fasthttp: the idle wait, the read once the first byte came, the
// write of the answer), each one a runtime timer moved under the
// poller's lock — ~3% of the gateway's CPU per one-at-a-time request
// (BENCHMARKS.md §0, "Eighteenth pass"). Each is later than the one
// before, and a deadline later than the one the poller holds needs no
// call at once: the poller's fires first, and then the read or write
// that waits asks for the one set last (wanted) and waits on.
//
// So a deadline keeps two times: wanted, the one set last (what every
// read and write obeys), and armed, the one the poller holds, never
// later than wanted. Setting a deadline no earlier than armed only
// records it; an earlier one is armed at once (a deadline in the past
// still ends a waiting read or write at once: Close-like wake-ups such
// as the hangup watch's stop and a cancelled broker fetch rely on it).
// When the poller's deadline passes, the read or write re-arms wanted
// if it is still ahead and carries on, else fails with the deadline
// error as before. Anything that waits on the descriptor without Read
// or Write (SyscallConn: the gateway's hangup watch) gets wanted armed
// first.
type deadline struct {
	wanted, armed atomic.Int64 // UnixNano; noDeadline: none
	mu            sync.Mutex   // orders arming against re-arming
}

// noDeadline is a deadline that never comes.
const noDeadline = math.MaxInt64

func (d *deadline) init() {
	d.wanted.Store(noDeadline)
	d.armed.Store(noDeadline)
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return noDeadline
	}
	return t.UnixNano()
}

// set records t; it arms t (through arm) only when t is earlier than
// what the poller holds.
func (d *deadline) set(t time.Time, arm func(time.Time) error) error {
	w := nanos(t)
	if w >= d.armed.Load() {
		d.wanted.Store(w)
		// A re-arm (under mu) may have armed the wanted before w
		// meanwhile: it loads wanted again after it stores armed, and we
		// load armed after we store wanted, so one of us sees the other
		// (the atomics are sequentially consistent).
		if w >= d.armed.Load() {
			return nil
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.wanted.Store(w)
	d.armed.Store(w)
	return arm(t)
}

// rearmLocked arms wanted (mu held), again if a set changed it
// meanwhile, and returns what it armed.
func (d *deadline) rearmLocked(arm func(time.Time) error) (int64, error) {
	for {
		w := d.wanted.Load()
		if w == d.armed.Load() {
			return w, nil
		}
		d.armed.Store(w)
		if err := arm(timeOf(w)); err != nil {
			return w, err
		}
	}
}

// sync arms wanted if the poller holds another deadline.
func (d *deadline) sync(arm func(time.Time) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, err := d.rearmLocked(arm)
	return err
}

// expired is called when a wait ended with the poller's deadline
// error: true when wanted is still ahead and now armed (wait again),
// false when the deadline that passed is the one asked for (fail).
func (d *deadline) expired(err error, arm func(time.Time) error) bool {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.wanted.Load() == d.armed.Load() {
		return false
	}
	w, err := d.rearmLocked(arm)
	return err == nil && w > time.Now().UnixNano()
}

func timeOf(n int64) time.Time {
	if n == noDeadline {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// SetDeadline sets the read and the write deadline (see deadline).
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the read deadline (see deadline).
func (c *Conn) SetReadDeadline(t time.Time) error {
	return c.rd.set(t, c.TCPConn.SetReadDeadline)
}

// SetWriteDeadline sets the write deadline (see deadline).
func (c *Conn) SetWriteDeadline(t time.Time) error {
	return c.wd.set(t, c.TCPConn.SetWriteDeadline)
}

// SyscallConn is the connection's raw connection, with the read and
// write deadlines last set armed: a wait on it (the gateway's hangup
// watch) obeys them as it would on a *net.TCPConn.
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	if err := c.rd.sync(c.TCPConn.SetReadDeadline); err != nil {
		return nil, err
	}
	if err := c.wd.sync(c.TCPConn.SetWriteDeadline); err != nil {
		return nil, err
	}
	return c.rc, nil
}
