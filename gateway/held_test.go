package gateway

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/api"
)

// TestSlowReadersHoldBoundedAnswerBytes is the attack of a holder that
// opens connection after connection, each fetching max_fetch_bytes and
// reading none of it: every answer stayed in the gateway's memory until
// write_timeout, as many as it had connections (the in-flight caps end
// when the handler returns, before the write). Now the answer bytes held
// are bounded per holder (the second unread answer is refused 429
// too_many_fetches, before: 200 and another 24 MiB held) and in all (a
// third holder gets 503 overloaded while two hold the total), while
// another holder's answer is served; once the readers go, the bytes are
// given back and the holder reads again.
func TestSlowReadersHoldBoundedAnswerBytes(t *testing.T) {
	const answer = 24 << 20 // beyond what loopback's socket buffers take
	h := newHarnessWith(t, harnessOptions{edit: func(c *Config) {
		c.Broker.MaxFetchBytes, c.MaxFetchBytes = answer, answer
		c.MaxAnswerBytesHeldPerHolder, c.MaxAnswerBytesHeld = answer, 2*answer
		c.WriteTimeout = time.Minute // the attacker's connections, not the clock, end the hold
		// Writing 72 MiB of records first keeps a busy machine (CI's two
		// cores under the race step, or a shared one) occupied for seconds;
		// the harness's 3 s would let the gateway fall out of sync and
		// answer 503 out_of_sync, which is not what this test is about.
		c.SyncTimeout = 12 * time.Second
		// Reading a 24 MiB answer from the embedded Kafka took over the
		// harness's 3 s broker request_timeout on a busy CI machine: the
		// fetch was answered 503 unavailable before the cap was reached.
		c.Broker.RequestTimeout = 30 * time.Second
	}})
	h.waitReady()
	value := make([]byte, 512<<10) // random: the producer compresses
	for p := range int32(3) {
		for range answer / len(value) {
			rand.Read(value)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := h.kc.Produce(ctx, testTopic, p, []*kgo.Record{{Value: value}})
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	tokens := make([]string, 3)
	for p := range tokens {
		tokens[p], _ = h.mint(capClaims(int32(p)))
	}
	path := func(p int) string { return recordsPath(int32(p), fmt.Sprintf("offset=0&max_bytes=%d", answer)) }
	raw := []string{"Accept", api.MediaRecordBatch}

	// unread sends a raw fetch of partition p on a connection with a tiny
	// receive window, reads the status line only, and keeps the
	// connection open, unread, until the test ends or close is called.
	unread := func(p int) (status string, close func()) {
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		}}
		conn, err := d.Dial("tcp", h.gw.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nAccept: %s\r\n\r\n", path(p), tokens[p], api.MediaRecordBatch)
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 16), nil)
		if err != nil {
			t.Fatalf("status of an unread fetch of partition %d: %v", p, err)
		}
		status = resp.Proto + " " + resp.Status
		if resp.StatusCode != http.StatusOK {
			// An error answer is small: say which one it was.
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			status += " " + string(body)
		}
		return status, func() { conn.Close() }
	}
	atLeast := func(n int64) func() bool { return func() bool { return h.gw.held.held() >= n } }
	// refused checks an error answer without printing a body of records.
	refused := func(what string, r response, status int, code api.Code) {
		t.Helper()
		if r.status != status || r.errorCode() != code || r.header.Get("Retry-After") == "" {
			t.Fatalf("%s: %d %s (%d bytes) Retry-After %q, want %d %s", what, r.status, r.errorCode(), len(r.body), r.header.Get("Retry-After"), status, code)
		}
	}

	status, closeA := unread(0)
	if status != "HTTP/1.1 200 OK" {
		t.Fatalf("holder A's first fetch: %q", status)
	}
	waitFor(t, "holder A's answer held", atLeast(answer/2))
	// A's second answer, read or not, would hold its bytes too: refused.
	refused("holder A's second fetch", h.get(tokens[0], path(0), raw...), 429, api.CodeTooManyFetches)
	refused("holder A's second fetch, as JSON", h.get(tokens[0], path(0)), 429, api.CodeTooManyFetches)
	// Another holder is served while A holds its share.
	if r := h.get(tokens[1], path(1), raw...); r.status != 200 || len(r.body) < answer/2 {
		t.Fatalf("holder B while A holds its share: %d, %d bytes", r.status, len(r.body))
	}
	status, closeB := unread(1)
	if status != "HTTP/1.1 200 OK" {
		t.Fatalf("holder B's unread fetch: %q", status)
	}
	waitFor(t, "both holders' answers held", atLeast(answer+answer/2))
	// A and B hold the gateway's total: a third holder is sent elsewhere.
	refused("holder C while A and B hold the total", h.get(tokens[2], path(2), raw...), 503, api.CodeOverloaded)

	closeA()
	closeB()
	waitFor(t, "the readers' bytes given back", func() bool { return h.gw.held.held() == 0 })
	for p := range 3 {
		if r := h.get(tokens[p], path(p), raw...); r.status != 200 || len(r.body) < answer/2 {
			t.Fatalf("holder of partition %d after the readers left: %d, %d bytes", p, r.status, len(r.body))
		}
	}
	waitFor(t, "every answer's bytes given back once written", func() bool { return h.gw.held.held() == 0 })
}

// TestHeldBytesCounts: per holder and in all, an answer that would pass a
// cap is refused without being counted; one is always let through when
// nothing is held (a first batch larger than the cap); giving back frees
// exactly what was taken.
func TestHeldBytesCounts(t *testing.T) {
	h := newHeldBytes(100, 60)
	steps := []struct {
		take   bool
		holder string
		n      int64
		want   api.Code
		total  int64
	}{
		{true, "a", 50, "", 50},
		{true, "a", 20, api.CodeTooManyFetches, 50}, // a: 70 > 60
		{true, "b", 60, api.CodeOverloaded, 50},     // in all: 110 > 100
		{true, "b", 50, "", 100},
		{false, "a", 50, "", 50},
		{true, "a", 70, api.CodeOverloaded, 50}, // a holds nothing, but in all 120 > 100
		{false, "b", 50, "", 0},
		{true, "c", 500, "", 500}, // nothing held: let through whole
		{true, "c", 1, api.CodeTooManyFetches, 500},
		{true, "d", 1, api.CodeOverloaded, 500},
		{false, "c", 500, "", 0},
	}
	for i, s := range steps {
		if s.take {
			if got := h.take(s.holder, s.n); got != s.want {
				t.Fatalf("step %d: take(%s, %d) = %q, want %q", i, s.holder, s.n, got, s.want)
			}
		} else {
			h.give(s.holder, s.n)
		}
		if got := h.held(); got != s.total {
			t.Fatalf("step %d: held %d, want %d", i, got, s.total)
		}
	}
	if h.Holders() != 0 {
		t.Fatalf("holders left counted: %v", h.Holders())
	}
}
