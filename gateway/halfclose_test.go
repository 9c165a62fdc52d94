package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// TestHalfClosedLongPollAnsweredEmpty is redteam3 #4: a client that
// half-closes its connection (shutdown(SHUT_WR), as `nc -N` and
// HTTP/1.0-style scripts do) during a long poll still reads. The poll
// still ends at once (an EOF cannot be told from a full close) but is
// answered as if max_wait had passed — 200, no records, next_offset the
// offset asked for — on a connection then closed; before, it got 503
// "client went away during the long poll". A fetch on another
// connection is unaffected, and the poll still counts as abandoned.
func TestHalfClosedLongPollAnsweredEmpty(t *testing.T) {
	h := newHarness(t, nil)
	tok, _ := h.mint(capClaims(1))
	conn, err := net.Dial("tcp", h.gw.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n\r\n", recordsPath(1, "offset=0&max_wait_ms=10000"), tok)
	if _, err := conn.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the long poll in flight", func() bool { return h.gw.inflight.count() == 1 })
	start := time.Now()
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(8 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to the half-closed client: %v", err)
	}
	defer resp.Body.Close()
	r := response{status: resp.StatusCode, header: resp.Header}
	if r.body, err = io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	if r.status != http.StatusOK {
		t.Fatalf("half-closed long poll: %d %s, want 200 as if max_wait had passed", r.status, r.body)
	}
	if f := r.fetch(t); len(f.Records) != 0 || f.NextOffset != 0 || f.HighWatermark != 0 {
		t.Fatalf("half-closed long poll: %s, want no records, next_offset 0, high_watermark 0", r.body)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the half-closed poll was answered after %v: it waited out max_wait (10s)", took)
	}
	if !resp.Close || r.header.Get(api.HeaderHighWatermark) != "0" {
		t.Fatalf("want Connection: close and the offset headers: %v", r.header)
	}
	waitFor(t, "the poll to end", func() bool { return h.gw.inflight.count() == 0 })
	if r := h.get(tok, recordsPath(1, "offset=0")); r.status != http.StatusOK {
		t.Fatalf("a fetch after: %d %s", r.status, r.body)
	}
}
