package console

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleNarrowWindow: in a window 400 px wide (a phone, a split
// screen) every page fits its width — the header's Gateways, Overrides,
// Audit and Log out were off the right edge and the members table pushed
// the whole page sideways (console5) — and every navigation link and Log
// out is on screen.
func TestConsoleNarrowWindow(t *testing.T) {
	s, b := onGroupPage(t)
	base := s.cluster.CoordinatorURL
	b.run("narrow window", 10*time.Second, chromedp.EmulateViewport(400, 860))
	fits := `(() => {
		const w = document.documentElement.clientWidth;
		if (document.documentElement.scrollWidth > w) return false;
		const on = (e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.left >= 0 && r.right <= w; };
		const links = [...document.querySelectorAll('header nav a')];
		return links.length >= 4 && links.every(on) && on(document.querySelector('form.logout button'));
	})()`
	for _, page := range []string{"/console/groups/" + group, "/console/groups", "/console/timeline", "/console/gateways", "/console/overrides", "/console/audit"} {
		b.run(page, 20*time.Second, chromedp.Navigate(base+page))
		b.waitFor(page+" fits 400 px", time.Now(), 10*time.Second, `document.readyState === 'complete' && `+fits)
	}
	b.click("log out, 400 px wide", `form.logout button`)
	b.waitFor("logged out", time.Now(), 10*time.Second, `location.pathname === '/console/login'`)
	b.noProblems("narrow")
}
