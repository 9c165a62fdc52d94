package console

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
)

// holdStream opens GET /console/events as the session of cookie on its
// own connection and returns it open (200), to close when told.
func holdStream(t *testing.T, base, cookie string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/console/events?after=0", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: "capgate_console", Value: cookie})
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("hold a stream: %d", resp.StatusCode)
	}
	return resp
}

// sessionCookie reads the browser's console session cookie (HttpOnly:
// over the DevTools protocol, not from the page).
func (b *browser) sessionCookie(base string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/console/"}})
	if err != nil {
		b.t.Fatalf("cookies: %v", err)
	}
	for _, c := range res.Cookies {
		if c.Name == "capgate_console" {
			return c.Value
		}
	}
	b.t.Fatal("no console session cookie in the browser")
	return ""
}

// TestConsoleStreamRetryInBrowser: in a real Chromium, a page whose live
// stream is refused — its session's other tabs hold its share
// (max_subscribers_per_session 2, the answer 429) — says "live updates
// paused — retrying" (EventSource never reconnects after a refusal: the
// page stayed silently stale), and once one of those tabs closes it is
// live again without a reload, with the event made while it was paused.
// Fails without the page's retry (no notice; never live again). The
// closed tab's slot comes back at once by the server's hang-up watch
// (coordinator TestConsoleStreamSharePerSession checks it; without it
// the slot waits for a failed ping write, 5–15 s, and this test too
// fails in our runs, but by the page's backoff schedule, not always).
func TestConsoleStreamRetryInBrowser(t *testing.T) {
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: 1, CoordinatorConfig: func(cfg *coordinator.Config) {
		cfg.Console.MaxSubscribersPerSession = 2
	}})
	base := cluster.CoordinatorURL
	b := newBrowser(t)
	login(b, base, cluster.AdminToken)
	b.waitFor("logged in", time.Now(), 10*time.Second, `location.pathname === '/console/groups'`)
	cookie := b.sessionCookie(base)
	held := []*http.Response{holdStream(t, base, cookie), holdStream(t, base, cookie)}

	b.run("timeline page", 20*time.Second, chromedp.Navigate(base+"/console/timeline"))
	b.waitFor("the refusal told", time.Now(), 10*time.Second,
		`document.getElementById('live').textContent.startsWith('live updates paused — retrying')`)
	eval[bool](b, `window.notReloaded = true`)
	b.screenshot("stream-paused")

	// An event while paused, then a tab of the session closes.
	if status, raw := cluster.Admin(t, "PUT", "/v1/admin/groups/while-paused/config", map[string]any{"max_moves_per_second": 3}, nil); status != http.StatusOK {
		t.Fatalf("config: %d %s", status, raw)
	}
	held[0].Body.Close()
	b.waitFor("live again, with the event made while paused", time.Now(), 10*time.Second,
		`document.getElementById('live').textContent === 'live' &&
		 [...document.querySelectorAll('#timeline li[data-kind="config"]')].some(li => li.textContent.includes('while-paused'))`)
	if !eval[bool](b, `window.notReloaded === true`) {
		t.Fatal("the page reloaded")
	}
	b.noProblems("after the stream resumed")
}
