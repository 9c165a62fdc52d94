package console

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// getEvents sends GET /console/events?query (with Last-Event-ID when not
// empty) over a real socket with the session cookie, and returns the
// answer's status, content type and, unless it is the stream, its body.
func getEvents(t *testing.T, addr, cookie, query, lastEventID string) (int, string, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "GET /console/events?" + query + " HTTP/1.1\r\nHost: console.test\r\nConnection: close\r\nCookie: " + sessionCookie + "=" + cookie + "\r\n"
	if lastEventID != "" {
		req += "Last-Event-ID: " + lastEventID + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound, not a wait
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("events?%s: %v", query, err)
	}
	contentType := resp.Header.Get("Content-Type") // the body ends with conn
	if contentType == "text/event-stream" {
		return resp.StatusCode, contentType, nil // a live stream: not read to its end
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("events?%s: %v", query, err)
	}
	return resp.StatusCode, contentType, body
}

// TestStreamStartHasOneSpelling: the event id a console stream starts
// after has the API's one spelling of a number (api.ParseDecimal), in the
// query and in Last-Event-ID: a sign, a leading zero, a space, a number
// past 2^63-1, a repeated or missing after are 400 bad_request with a
// JSON error body naming the rule, as a bad query number of the admin
// API. strconv read +5, 05 and (Last-Event-ID) 05 as 5, so two
// spellings named one position.
func TestStreamStartHasOneSpelling(t *testing.T) {
	b := newTestConsole(t, stubBackend{}, time.Now)
	addr := serveOnSocket(t, b)
	b.login()
	cookie := b.cookies[sessionCookie]
	for _, tc := range []struct{ query, lastEventID, names string }{
		{"after=%2B5", "", "after"},
		{"after=+5", "", "after"}, // '+' is a space in a query
		{"after=%205", "", "after"},
		{"after=05", "", "after"},
		{"after=-1", "", "after"},
		{"after=18446744073709551616", "", "after"},
		{"after=9223372036854775808", "", "after"},
		{"after=", "", "after"},
		{"group=g", "", "after"},
		{"after=1&after=2", "", "after"},
		{"after=05", "7", "after"}, // checked also when Last-Event-ID overrides it
		{"after=5", "05", "Last-Event-ID"},
		{"after=5", "+7", "Last-Event-ID"},
		{"after=5", "7x", "Last-Event-ID"},
		{"after=5", "18446744073709551616", "Last-Event-ID"},
	} {
		status, contentType, body := getEvents(t, addr, cookie, tc.query, tc.lastEventID)
		var problem struct {
			Error struct{ Code, Message string }
		}
		if status != http.StatusBadRequest || contentType != "application/json" || json.Unmarshal(body, &problem) != nil ||
			problem.Error.Code != "bad_request" || !strings.HasPrefix(problem.Error.Message, tc.names) ||
			!strings.Contains(problem.Error.Message, "without sign or leading zeros") {
			t.Errorf("events?%s Last-Event-ID %q: %d %s %s, want 400 bad_request naming %s and the rule", tc.query, tc.lastEventID, status, contentType, body, tc.names)
		}
	}
	for _, tc := range []struct{ query, lastEventID string }{{"after=0", ""}, {"group=g&after=5", "7"}} {
		if status, contentType, body := getEvents(t, addr, cookie, tc.query, tc.lastEventID); status != http.StatusOK || contentType != "text/event-stream" {
			t.Errorf("events?%s Last-Event-ID %q: %d %s %s, want the stream", tc.query, tc.lastEventID, status, contentType, body)
		}
	}
	b.c.Close() // the streams end now, not at their next ping
}
