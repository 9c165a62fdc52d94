package console

import (
	"strconv"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/e2e/sdk"
)

// readsRecorder records, in every page, each fetch the page's script
// makes (its URL, whether the page was hidden, and the event being
// handled when it was made: "visibilitychange" for a read made because
// the page was shown) and counts the ticks of its setInterval timers.
// Injected over CDP, it runs outside the page's CSP.
const readsRecorder = `
	window.__reads = [];
	window.__ticks = 0;
	const fetch0 = window.fetch;
	window.fetch = function (input) {
		window.__reads.push({ url: String(input), hidden: document.hidden, via: window.event ? window.event.type : '' });
		return fetch0.apply(this, arguments);
	};
	const setInterval0 = window.setInterval;
	window.setInterval = function (fn, ms, ...rest) {
		return setInterval0.call(window, function () { window.__ticks++; return fn.apply(this, arguments); }, ms, ...rest);
	};`

// setHidden minimizes (hidden) or restores (shown) the browser's window:
// Chromium then reports the page hidden or visible (document.hidden,
// visibilitychange), as for a tab in the background.
func (b *browser) setHidden(hidden bool) {
	b.t.Helper()
	w, err := chromedp.Call(b.ctx, cdpbrowser.GetWindowForTarget, cdpbrowser.GetWindowForTargetParams{})
	if err != nil {
		b.t.Fatal(err)
	}
	state := cdpbrowser.WindowStateNormal
	if hidden {
		state = cdpbrowser.WindowStateMinimized
	}
	if _, err := chromedp.Call(b.ctx, cdpbrowser.SetWindowBounds, cdpbrowser.SetWindowBoundsParams{WindowID: w.WindowID, Bounds: &cdpbrowser.Bounds{WindowState: state}}); err != nil {
		b.t.Fatal(err)
	}
	want := "false"
	if hidden {
		want = "true"
	}
	b.waitFor("document.hidden "+want, time.Now(), 15*time.Second, `document.hidden === `+want)
}

// TestConsoleBackgroundTabsDoNotReRead: a page in a hidden tab re-read
// as often as a visible one — the group's grid every 5 s and after each
// event changing it, the gateways page every second. Now nothing is
// re-read while the page is hidden, though the timers tick and the event
// stream carries a join (its line is shown); when the page is shown
// again it re-reads once, at once (in the visibilitychange handler), and
// shows what changed.
func TestConsoleBackgroundTabsDoNotReRead(t *testing.T) {
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: 4})
	member := func(name string) {
		cluster.NewMember(t, sdk.MemberOptions{Name: name, Group: group, Configure: func(cfg *client.Config) { cfg.ClientID = name }})
	}
	member("c1")
	sdk.Eventually(t, 20*time.Second, "c1 settled", func() (bool, string) { return cluster.Settled(t, group, 1) })
	b := newBrowser(t)
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: readsRecorder}); err != nil {
		t.Fatal(err)
	}
	login(b, cluster.CoordinatorURL, cluster.AdminToken)
	b.waitFor("logged in", time.Now(), 15*time.Second, `location.pathname === '/console/groups'`)
	b.run("group page", 20*time.Second, chromedp.Navigate(cluster.CoordinatorURL+"/console/groups/"+group))
	b.waitFor("live", time.Now(), 15*time.Second, `document.getElementById('live')?.textContent === 'live'`)

	grid := `'/console/groups/` + group + `/live'`
	hiddenReads := func(path string) string {
		return `window.__reads.filter(r => r.hidden && r.url.startsWith(` + path + `)).length`
	}
	b.setHidden(true)
	ticks := eval[int](b, `window.__ticks`)
	joins := eval[int](b, `document.querySelectorAll('#timeline li[data-kind="join"]').length`)
	member("c2") // events that change the grid: a join, a fence, grants
	b.waitFor("the hidden page's timeline shows the join", time.Now(), 30*time.Second,
		`document.querySelectorAll('#timeline li[data-kind="join"]').length > `+strconv.Itoa(joins))
	b.waitFor("two re-reads fall due while hidden", time.Now(), 30*time.Second, `window.__ticks >= `+strconv.Itoa(ticks+2))
	if n := eval[int](b, hiddenReads(grid)); n != 0 {
		t.Fatalf("the hidden group page re-read its grid %d times", n)
	}
	if rows := eval[int](b, `document.querySelectorAll('#members tbody tr[data-member]').length`); rows != 1 {
		t.Fatalf("the hidden page's members table changed (%d rows): it re-read", rows)
	}

	b.setHidden(false)
	b.waitFor("shown again, it re-reads at once and shows both members", time.Now(), 30*time.Second,
		`window.__reads.some(r => !r.hidden && r.via === 'visibilitychange' && r.url.startsWith(`+grid+`)) && `+
			`document.querySelectorAll('#members tbody tr[data-member]').length === 2`)
	b.noProblems("group page")

	// The gateways page re-reads every second.
	b.run("gateways page", 20*time.Second, chromedp.Navigate(cluster.CoordinatorURL+"/console/gateways"))
	b.waitFor("read", time.Now(), 15*time.Second, `window.__reads.some(r => r.url.startsWith('/console/gateways'))`)
	b.setHidden(true)
	ticks = eval[int](b, `window.__ticks`)
	b.waitFor("three re-reads fall due while hidden", time.Now(), 30*time.Second, `window.__ticks >= `+strconv.Itoa(ticks+3))
	if n := eval[int](b, hiddenReads(`'/console/gateways'`)); n != 0 {
		t.Fatalf("the hidden gateways page re-read %d times", n)
	}
	b.setHidden(false)
	b.waitFor("shown again, it re-reads at once", time.Now(), 30*time.Second,
		`window.__reads.some(r => !r.hidden && r.via === 'visibilitychange' && r.url.startsWith('/console/gateways'))`)
	b.noProblems("gateways page")
}
