package coordinator_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"
)

// The console's live streams over HTTP with logged-in sessions: one
// session's share of the slots (redteam2 J: 32 slots for every operator
// together, a dead stream holding its slot until a ping write failed).

// stream opens GET /console/events?after=0 as c's session on its own
// connection: status, and the response to close (nil unless 200).
func (c *consoleClient) stream(t *testing.T) (int, *http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", c.h.base+"/console/events?after=0", nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.cookies {
		req.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	// A transport per stream: closing one closes its connection.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == 200 {
		t.Cleanup(func() { resp.Body.Close() })
		return 200, resp, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Retry-After") == "" {
		t.Errorf("refused stream %d without Retry-After: %s", resp.StatusCode, body)
	}
	return resp.StatusCode, nil, body
}

// TestConsoleStreamSharePerSession: one session's tabs take at most
// max_subscribers_per_session (8) of the max_subscribers (10) slots; its
// 9th and 10th stream are 429 naming the setting, and another session
// still gets a stream. A stream whose client hangs up gives its slot back
// at once (within 2 s; pings are 5 s apart). Fails without the share
// (the first session takes all 10, the second gets 503) and without the
// hang-up watch (the slot comes back at a failed ping write, 5–15 s).
func TestConsoleStreamSharePerSession(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.Console.MaxSubscribers = 10
	h := e.start(t)
	first, second := newConsoleClient(t, h), newConsoleClient(t, h)
	for _, c := range []*consoleClient{first, second} {
		if a := c.login(e.adminToken, nil); a.status != 303 {
			t.Fatalf("login: %d", a.status)
		}
	}
	var held []*http.Response
	for i := range 10 {
		status, resp, body := first.stream(t)
		switch {
		case i < 8 && status == 200:
			held = append(held, resp)
		case i >= 8 && status == 429:
			var e struct {
				Error struct{ Code, Limit string }
			}
			if json.Unmarshal(body, &e) != nil || e.Error.Code != "rate_limited" || e.Error.Limit != "coordinator.console.max_subscribers_per_session" {
				t.Fatalf("the first session's stream %d: %s", i+1, body)
			}
		default:
			t.Fatalf("the first session's stream %d: %d %s, want %s", i+1, status, body, map[bool]string{true: "200", false: "429"}[i < 8])
		}
	}
	if status, _, body := second.stream(t); status != 200 {
		t.Fatalf("another session's stream while the first holds its share: %d %s", status, body)
	}

	held[0].Body.Close() // the tab is closed
	deadline := time.Now().Add(2 * time.Second)
	for {
		status, _, body := first.stream(t)
		if status == 200 {
			break
		}
		if status != 429 || time.Now().After(deadline) {
			t.Fatalf("a stream after one of the session's hung up: %d %s (still refused after 2 s: its slot was held)", status, body)
		}
		time.Sleep(10 * time.Millisecond) // polling the real server for the slot
	}
}
