package console

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestConsoleKeyboardKeepsItsPlace: an operator on the keyboard keeps
// the element they are on while the page re-reads itself under them. The
// group page swaps in its members and grid at every commit and every 5 s,
// the groups page its table every 5 s: the focused button or link went
// with the old nodes and the keyboard's place fell back to the top of the
// page (console5) — Tab to a partition's Revoke, and a moment later Enter
// did nothing. The dialog a key opened gives the keyboard back to its
// button when it closes, the new one if a re-read replaced it meanwhile.
func TestConsoleKeyboardKeepsItsPlace(t *testing.T) {
	s, b := onGroupPage(t)
	base := s.cluster.CoordinatorURL

	revoke2 := `document.querySelector('.cell[data-partition="demo/2"] button[data-action="revoke-partition"]')`
	// The place: demo/1's last button, then Tab onto demo/2's Revoke.
	eval[bool](b, `(document.querySelector('.cell[data-partition="demo/1"] .acts button:last-of-type').focus(), true)`)
	b.run("tab", 10*time.Second, chromedp.KeyEvent(kb.Tab))
	b.waitFor("on demo/2's Revoke", time.Now(), 5*time.Second, `document.activeElement === `+revoke2)

	// A re-read replaces the button; the keyboard stays on demo/2's Revoke.
	eval[bool](b, `(window.__was = document.activeElement, true)`)
	b.waitFor("the grid re-read", time.Now(), 15*time.Second, `!window.__was.isConnected`)
	b.waitFor("still on demo/2's Revoke", time.Now(), 2*time.Second,
		`document.activeElement !== window.__was && document.activeElement === `+revoke2)

	// Enter opens its dialog; a re-read under the dialog; Escape gives the
	// keyboard back to demo/2's Revoke.
	b.run("enter", 10*time.Second, chromedp.KeyEvent(kb.Enter))
	b.waitFor("the dialog", time.Now(), 10*time.Second,
		`document.getElementById('confirm').open && document.getElementById('confirm-title').textContent === 'Revoke partition demo/2'`)
	eval[bool](b, `(window.__was = `+revoke2+`, true)`)
	b.waitFor("the grid re-read under the dialog", time.Now(), 15*time.Second, `!window.__was.isConnected`)
	b.run("escape", 10*time.Second, chromedp.KeyEvent(kb.Escape))
	b.waitFor("the dialog closed, back on demo/2's Revoke", time.Now(), 5*time.Second,
		`!document.getElementById('confirm').open && document.activeElement === `+revoke2)

	// The groups page re-reads its table every 5 s: the link stays focused.
	b.run("groups page", 20*time.Second, chromedp.Navigate(base+"/console/groups"))
	link := `document.querySelector('#groups tr[data-group="demo"] a')`
	b.waitFor("the demo row", time.Now(), 10*time.Second, link+` !== null`)
	eval[bool](b, `(`+link+`.focus(), window.__was = document.activeElement, true)`)
	b.waitFor("the table re-read", time.Now(), 15*time.Second, `!window.__was.isConnected`)
	b.waitFor("still on demo's link", time.Now(), 2*time.Second, `document.activeElement === `+link)
	b.run("enter on the link", 10*time.Second, chromedp.KeyEvent(kb.Enter))
	b.waitFor("the group page", time.Now(), 10*time.Second, `location.pathname === '/console/groups/demo'`)
	b.noProblems("keyboard")
}
