package coordinator_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// chromiumAccept is what Chromium sends with a navigation.
const chromiumAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"

// TestStandbyWithoutALeaderShowsABrowserAPage: a replica that does not
// lead and knows no leader (here one that can never take the log over —
// another coordinator id — after the leader stopped: it names nobody
// for good) answered a browser's console page with the raw JSON 421
// body. Now a browser's navigation gets an HTML page, 421, with the
// console's headers, saying no replica leads and reloading itself (a
// meta refresh); the console's static files are served for it; a
// script's read, the event stream, JSON clients and actions keep the
// JSON 421. Once a leader is known the same request is sent there (307).
func TestStandbyWithoutALeaderShowsABrowserAPage(t *testing.T) {
	e := newEnvBrokers(t, map[string]int32{"orders": 2}, 3)
	useKafkaState(t, e)
	s := startReplicas(t, e, 1)
	s.awaitLeader(t)
	typo := e.cfg.ID + "-typo"
	s.startEdited(t, 1, func(cfg *coordinator.Config) { cfg.ID = typo }, coordinator.SkipStartCheck)
	standby := s.harness(1)
	awaitUnfit(t, standby, []string{typo})
	s.stop(t, 0)
	eventually(t, func() string {
		if _, hint, _ := s.replicas[1].Watch(); hint.URL != "" {
			return "the standby still names " + hint.URL
		}
		return ""
	})

	noFollow := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(method, path, accept string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(method, standby.base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(body)
	}

	status, header, body := get("GET", "/console/groups/orders?from=0", chromiumAccept)
	if status != http.StatusMisdirectedRequest || !strings.HasPrefix(header.Get("Content-Type"), "text/html") {
		t.Fatalf("a browser's page at a standby without a leader: %d %s\n%s", status, header.Get("Content-Type"), body)
	}
	for _, want := range []string{"no replica leads right now", "replica-1", `<meta http-equiv="refresh" content="2">`, `href="/console/static/console.css"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("the page lacks %q:\n%s", want, body)
		}
	}
	if header.Get("Content-Security-Policy") == "" || header.Get("X-Frame-Options") != "DENY" || header.Get("Cache-Control") != "no-store" || header.Get(api.HeaderLeader) != "" {
		t.Fatalf("the page's headers: %v", header)
	}
	if status, header, _ := get("HEAD", "/console", chromiumAccept); status != http.StatusMisdirectedRequest || !strings.HasPrefix(header.Get("Content-Type"), "text/html") {
		t.Fatalf("HEAD /console: %d %s", status, header.Get("Content-Type"))
	}
	if status, header, body := get("GET", "/console/static/console.css", "text/css,*/*;q=0.1"); status != 200 || !strings.HasPrefix(header.Get("Content-Type"), "text/css") || body == "" {
		t.Fatalf("the page's style: %d %s", status, header.Get("Content-Type"))
	}
	for _, c := range []struct{ method, path, accept string }{
		{"GET", "/console/groups", ""},
		{"GET", "/console/groups", "*/*"},
		{"GET", "/console/groups", "application/json"},
		{"GET", "/console/groups/orders/live", "*/*"},
		{"GET", "/console/events?after=0", "text/event-stream"},
		{"POST", "/console/login", chromiumAccept},
		{"GET", "/v1/admin/groups", chromiumAccept},
	} {
		status, header, body := get(c.method, c.path, c.accept)
		var eb struct {
			Error struct {
				Code    api.Code `json:"code"`
				Message string   `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &eb); err != nil || status != http.StatusMisdirectedRequest || eb.Error.Code != api.CodeNotLeader ||
			!strings.Contains(eb.Error.Message, "no leader known") {
			t.Fatalf("%s %s (Accept %q): %d %s %s, want the JSON 421", c.method, c.path, c.accept, status, header.Get("Content-Type"), body)
		}
	}

	s.start(t, 0) // back (on another port): it takes the log over again
	leaderURL := s.replicas[0].URL()
	eventually(t, func() string {
		if _, hint, _ := s.replicas[1].Watch(); hint.URL != leaderURL {
			return fmt.Sprintf("the standby names %q, want %s", hint.URL, leaderURL)
		}
		return ""
	})
	if status, header, body := get("GET", "/console/groups/orders?from=0", chromiumAccept); status != http.StatusTemporaryRedirect || header.Get("Location") != leaderURL+"/console/groups/orders?from=0" {
		t.Fatalf("with a leader known: %d %q\n%s", status, header.Get("Location"), body)
	}
}
