package console

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestConsoleSessionEndsUnderADialog: an operator's session ends (it
// expires, or Log out in another tab) while a dialog is open with what
// they typed. Before, the page's next re-read sent it to the login page
// at once — the dialog and its fields gone without a word — and an action
// confirmed first came back "401 unauthorized: log in to the console
// first" with Confirm ready again and no way back named. Now the dialog
// stays, says nothing was done, and links to the login page (closing it
// goes there); a page of an earlier session (a newer login in another
// tab) is told to reload, not "missing or wrong CSRF token". Nothing is
// set in any case.
func TestConsoleSessionEndsUnderADialog(t *testing.T) {
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: 4})
	base := cluster.CoordinatorURL
	b := loggedIn(t, cluster)
	noOverride := func(where string) {
		t.Helper()
		var list coordinator.QoSListResponse
		if status, raw := cluster.Admin(t, "GET", "/v1/admin/qos", nil, &list); status != 200 || len(list.Overrides) != 0 {
			t.Fatalf("%s: QoS overrides %d %s, want none set", where, status, raw)
		}
	}
	openFilled := func() {
		t.Helper()
		b.run("overrides page", 20*time.Second, chromedp.Navigate(base+"/console/overrides"))
		b.click("qos dialog", `button[data-action="qos"]`)
		b.waitFor("qos fields", time.Now(), 15*time.Second, `document.querySelector('#confirm-fields input[name="topic"]') !== null`)
		b.run("fill the override", 10*time.Second,
			chromedp.SetValue(chromedp.CSS(`#confirm-fields input[name="topic"]`), "demo"),
			chromedp.SetValue(chromedp.CSS(`#confirm-fields input[name="max_bytes_per_sec"]`), "1000"))
	}
	// Log out as another tab would: the server forgets the session.
	const logoutElsewhere = `fetch('/console/logout', { method: 'POST', redirect: 'manual', credentials: 'same-origin',
		headers: { 'X-CSRF-Token': document.querySelector('meta[name="csrf-token"]').content } })`
	toldAndKept := func(what, text, link string) {
		t.Helper()
		b.waitFor(what, time.Now(), 20*time.Second, `(() => {
			const out = document.getElementById('confirm-outcome'), a = document.getElementById('login-again');
			return document.getElementById('confirm').open && out.className.includes('bad') && out.textContent.includes(`+js(text)+`) &&
				a && a.getAttribute('href') === `+js(link)+` && document.getElementById('confirm-ok').disabled &&
				document.querySelector('#confirm-fields input[name="topic"]').value === 'demo' &&
				document.querySelector('#confirm-fields input[name="max_bytes_per_sec"]').value === '1000' })()`)
	}

	// Confirmed after the session ended: not done, said so, a way back.
	openFilled()
	eval[bool](b, logoutElsewhere+`.then(() => { document.getElementById('confirm-ok').click(); return true })`)
	toldAndKept("the 401 told as the session's end", "session has ended (it expired, or was logged out in another tab): this was not done", "/console/login")
	noOverride("after a confirm without a session")
	// Closing the dialog goes to the login page.
	b.run("close", 5*time.Second, chromedp.Click(chromedp.ID("confirm-cancel")))
	b.waitFor("on the login page", time.Now(), 15*time.Second, `location.pathname === '/console/login'`)

	// The page's re-read (every 5 s here) finds the session gone while the
	// dialog is open: the page stays, the dialog says so, the fields kept.
	login(b, base, cluster.AdminToken)
	b.waitFor("logged in", time.Now(), 10*time.Second, `location.pathname === '/console/groups'`)
	openFilled()
	eval[bool](b, logoutElsewhere+`.then(() => true)`)
	toldAndKept("the re-read's 303 told in the open dialog", "nothing in this dialog was sent", "/console/login")
	if got := eval[string](b, `document.getElementById('live').textContent`); got != "session ended — log in again" {
		t.Fatalf("the live badge says %q", got)
	}
	b.run("follow the link", 5*time.Second, chromedp.Click(chromedp.ID("login-again")))
	b.waitFor("on the login page", time.Now(), 15*time.Second, `location.pathname === '/console/login'`)

	// A newer login in another tab: this page's CSRF token is the earlier
	// session's; it is told to reload.
	login(b, base, cluster.AdminToken)
	b.waitFor("logged in", time.Now(), 10*time.Second, `location.pathname === '/console/groups'`)
	openFilled()
	eval[string](b, `(async () => {
		const form = new DOMParser().parseFromString(await (await fetch('/console/login')).text(), 'text/html');
		const body = new URLSearchParams({ csrf: form.querySelector('input[name="csrf"]').value, token: `+js(cluster.AdminToken)+` });
		return (await fetch('/console/login', { method: 'POST', body, redirect: 'manual' })).type })()`)
	b.run("confirm", 10*time.Second, chromedp.Click(chromedp.ID("confirm-ok")))
	toldAndKept("the stale page told to reload", "earlier console session", "/console/overrides")
	noOverride("after a confirm from a stale page")
	b.noProblems("session ended")
}
