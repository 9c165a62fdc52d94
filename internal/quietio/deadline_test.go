//go:build linux

package quietio

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// A deadline set later than the one the poller holds is only recorded
// (deadline.go); these check that every wait still obeys the deadline
// set last, whichever way it moved.

// earlierThenLater sets a deadline 20 ms ahead with set, then a later
// one (only recorded: the poller keeps the first), and returns the later.
func earlierThenLater(t *testing.T, set func(time.Time) error) time.Time {
	t.Helper()
	if err := set(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(300 * time.Millisecond)
	if err := set(later); err != nil {
		t.Fatal(err)
	}
	return later
}

// endedAtTheDeadline fails unless err is the deadline's and now is past
// the deadline set last.
func endedAtTheDeadline(t *testing.T, what string, err error, later time.Time) {
	t.Helper()
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: %v, want the deadline", what, err)
	}
	if now := time.Now(); now.Before(later) {
		t.Fatalf("%s ended %v before the deadline set last", what, later.Sub(now))
	}
}

// A later read deadline wins over an earlier one set before it: the
// read fails at the later one, not when the poller's earlier one passes.
func TestLaterReadDeadlineIsTheOneObeyed(t *testing.T) {
	q, _ := pair(t)
	later := earlierThenLater(t, q.SetReadDeadline)
	_, err := q.Read(make([]byte, 8))
	endedAtTheDeadline(t, "read", err, later)
}

// A deadline lifted (zero) after an earlier one lets the read wait on
// past the earlier one, for the data that comes.
func TestLiftedReadDeadlineLetsTheReadWait(t *testing.T) {
	q, client := pair(t)
	waits := make(chan struct{}, 8)
	q.waitHook = func(write bool) {
		if !write {
			waits <- struct{}{}
		}
	}
	if err := q.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := q.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := q.Read(make([]byte, 8))
		done <- result{n, err}
	}()
	for range 2 { // waiting under the poller's 20 ms deadline; then again, that deadline passed
		select {
		case <-waits:
		case r := <-done:
			t.Fatalf("read ended at the earlier deadline: %d, %v", r.n, r.err)
		}
	}
	if _, err := client.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.n != 5 {
		t.Fatalf("read: %d, %v; want the 5 bytes sent after the earlier deadline", r.n, r.err)
	}
}

// A deadline brought nearer ends a read waiting under a later one at
// once (the gateway's hangup watch stops so, and a cancelled broker
// fetch).
func TestNearerReadDeadlineEndsAWaitingRead(t *testing.T) {
	q, _ := pair(t)
	waits := make(chan struct{}, 8)
	q.waitHook = func(bool) { waits <- struct{}{} }
	if err := q.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := q.Read(make([]byte, 8))
		done <- err
	}()
	<-waits
	if err := q.SetReadDeadline(time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read: %v, want the deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read waiting under a deadline an hour away did not end when the deadline was brought to the past")
	}
}

// A wait on the raw connection (the hangup watch) obeys the deadline
// set last, not an earlier one the poller still held.
func TestSyscallConnArmsTheDeadlineSetLast(t *testing.T) {
	q, _ := pair(t)
	later := earlierThenLater(t, q.SetReadDeadline)
	raw, err := q.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	err = raw.Read(func(uintptr) bool { return false }) // wait until the deadline
	endedAtTheDeadline(t, "raw wait", err, later)
}

// The same for writes: a later write deadline is the one obeyed. (How
// much is written first is not checked: on a machine short of socket
// memory even the first write may find no room — TestWriteDeadline
// fails so there, before and after lazy deadlines.)
func TestLaterWriteDeadlineIsTheOneObeyed(t *testing.T) {
	q, _ := pair(t) // the client never reads: the buffers fill
	later := earlierThenLater(t, q.SetWriteDeadline)
	n, err := q.Write(make([]byte, 64<<20))
	if n >= 64<<20 {
		t.Fatalf("wrote all %d bytes to a client that never reads", n)
	}
	endedAtTheDeadline(t, "write", err, later)
}

// WriteBuffers (writev) obeys the write deadline set last too. Through
// net.Buffers.WriteTo the embedded *net.TCPConn's writev waited on the
// poller's earlier deadline alone: once that passed, every writev failed
// at once although the deadline set last was ahead (the Kafka listener's
// Fetch answers: its connections were closed write_timeout after their
// first armed write deadline).
func TestWriteBuffersObeysTheDeadlineSetLast(t *testing.T) {
	q, client := pair(t)
	if err := q.SetWriteDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := q.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the poller's deadline passes
	bufs := net.Buffers{[]byte("ab"), []byte("cd")}
	if n, err := q.WriteBuffers(&bufs); err != nil || n != 4 {
		t.Fatalf("writev past the poller's earlier deadline: %d bytes, %v; want all 4 (the deadline set last is a minute ahead)", n, err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(client, got); err != nil || string(got) != "abcd" {
		t.Fatalf("the client read %q, %v", got, err)
	}
}

// ReadFrom and WriteTo — what bufio.Writer.ReadFrom (a fasthttp body
// stream's copy) and io.Copy find on the connection — obey the deadline
// set last too: the embedded *net.TCPConn's waited on the poller's
// earlier one and failed "i/o timeout" once it had passed.
func TestReadFromAndWriteToObeyTheDeadlineSetLast(t *testing.T) {
	q, client := pair(t)
	for _, set := range []func(time.Time) error{q.SetWriteDeadline, q.SetReadDeadline} {
		if err := set(time.Now().Add(20 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if err := set(time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond) // the poller's deadlines pass
	const size = 4 << 20              // more than the socket buffers hold
	got := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(io.Discard, client)
		got <- n
	}()
	w := bufio.NewWriterSize(q, 4096)
	if n, err := w.ReadFrom(io.LimitReader(zeros{}, size)); err != nil || n != size {
		t.Fatalf("bufio's ReadFrom past the poller's earlier deadline: %d bytes, %v; want all %d", n, err, size)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	client.CloseWrite()
	var read bytes.Buffer
	if n, err := q.WriteTo(&read); err != nil || n != 5 || read.String() != "hello" {
		t.Fatalf("WriteTo past the poller's earlier deadline: %d bytes %q, %v", n, read.String(), err)
	}
	q.CloseWrite()
	if n := <-got; n != size {
		t.Fatalf("the client read %d bytes, want %d", n, size)
	}
}

// zeros reads as endless zero bytes (and is no io.WriterTo).
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
