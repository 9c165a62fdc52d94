package console

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestConsoleProblemPagesInBrowser (newuser3 #10): in a real Chromium, an
// unknown group's page names the group (it said "console: not found"),
// and an unknown console path is the Problem page with its way back —
// before, the browser showed the raw JSON error as text.
func TestConsoleProblemPagesInBrowser(t *testing.T) {
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: 1})
	base := cluster.CoordinatorURL
	b := loggedIn(t, cluster)

	b.run("an unknown group", 20*time.Second, chromedp.Navigate(base+"/console/groups/nosuch"))
	b.waitFor("the Problem page names the group", time.Now(), 10*time.Second,
		`document.querySelector('main h1')?.textContent === 'Problem' && document.querySelector('main p.error')?.textContent === 'unknown group nosuch'`)
	b.noProblems("unknown group")

	b.run("an unknown console path", 20*time.Second, chromedp.Navigate(base+"/console/nosuch"))
	b.waitFor("the Problem page, not JSON", time.Now(), 10*time.Second,
		`document.contentType === 'text/html' && document.querySelector('main h1')?.textContent === 'Problem' &&
		 document.querySelector('main p.error')?.textContent === 'no such console page: GET "/console/nosuch"' &&
		 document.querySelector('main a[href="/console/groups"]') !== null`)
	b.screenshot("problem")
	b.click("back to the groups", `main a[href="/console/groups"]`)
	b.waitFor("back on the groups page", time.Now(), 10*time.Second, `location.pathname === '/console/groups' && document.getElementById('groups') !== null`)
}
