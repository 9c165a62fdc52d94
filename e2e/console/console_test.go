package console

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/e2e/sdk"
)

const group = "demo"

// stack is the demo's shape: kfake with a 12-partition topic, a
// coordinator, two gateways, a producer, three SDK consumers of one group.
type stack struct {
	cluster *sdk.Cluster
	members []*sdk.Member
}

func startStack(t *testing.T) *stack {
	t.Helper()
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: 12, Gateways: 2})
	cluster.StartLoad(t, sdk.LoadOptions{Interval: 50 * time.Millisecond})
	s := &stack{cluster: cluster}
	for range 3 {
		s.addMember(t)
	}
	sdk.Eventually(t, 20*time.Second, "3 members settled", func() (bool, string) { return cluster.Settled(t, group, 3) })
	return s
}

// addMember starts consumer c<n>, committing as it goes, and returns once
// its join returned.
func (s *stack) addMember(t *testing.T) *sdk.Member {
	t.Helper()
	name := "c" + strconv.Itoa(len(s.members)+1)
	m := s.cluster.NewMember(t, sdk.MemberOptions{
		Name: name, Group: group, CommitInterval: 200 * time.Millisecond,
		Configure: func(cfg *client.Config) { cfg.ClientID = name },
	})
	s.members = append(s.members, m)
	return m
}

// login logs the browser in with token through the login form.
func login(b *browser, base, token string) {
	b.t.Helper()
	b.run("login form", 20*time.Second,
		chromedp.Navigate(base+"/console/login"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Submit(chromedp.ID("login-form")),
	)
}

// loggedIn is a browser logged in to cluster's console with the admin
// token, on the groups page.
func loggedIn(t *testing.T, cluster *sdk.Cluster) *browser {
	t.Helper()
	b := newBrowser(t)
	login(b, cluster.CoordinatorURL, cluster.AdminToken)
	b.waitFor("logged in", time.Now(), 10*time.Second, `location.pathname === '/console/groups'`)
	return b
}

// onGroupPage starts the stack, logs a browser in with the admin token and
// opens the group's page once its grid shows 12 owned partitions.
func onGroupPage(t *testing.T) (*stack, *browser) {
	t.Helper()
	s := startStack(t)
	b := loggedIn(t, s.cluster)
	b.run("group page", 20*time.Second, chromedp.Navigate(s.cluster.CoordinatorURL+"/console/groups/"+group))
	b.waitFor("grid", time.Now(), 10*time.Second, `document.querySelectorAll('.cell[data-state="owned"]').length === 12`)
	return s, b
}

// js quotes s as a JavaScript string literal.
func js(s string) string { return strconv.Quote(s) }

// TestConsoleInBrowser is the console's Must-show in a real Chromium: a
// wrong token is refused; the admin token logs in; the 3-member group is
// on screen; a 4th member's join reaches the grid and the timeline within
// 1 s without a reload; a revoke from the console shows its fence, the
// gateway's ack and the new epoch; a request without the CSRF token is
// refused. It screenshots the main views.
func TestConsoleInBrowser(t *testing.T) {
	s := startStack(t)
	base := s.cluster.CoordinatorURL
	b := newBrowser(t)

	// A wrong token is refused, and no token ever lands in the URL.
	login(b, base, "not-the-admin-token")
	b.waitFor("wrong token refused", time.Now(), 10*time.Second,
		`location.pathname === '/console/login' && document.querySelector('#login-error')?.textContent.includes('not an admin token')`)
	href := eval[string](b, `location.href`)
	if strings.Contains(href, "not-the-admin-token") || strings.Contains(href, "token=") {
		t.Fatalf("a token reached the URL: %s", href)
	}
	b.screenshot("login")

	// The admin token logs in; the session is an HttpOnly cookie, nothing
	// in web storage.
	login(b, base, s.cluster.AdminToken)
	b.waitFor("groups page after login", time.Now(), 10*time.Second,
		`location.pathname === '/console/groups' && document.querySelector('#groups tr[data-group="demo"]')?.children[1].textContent === '3'`)
	stored := eval[string](b, `document.cookie + '|' + localStorage.length + '|' + sessionStorage.length`)
	if stored != "|0|0" {
		t.Fatalf("script-visible cookies or web storage after login: %q", stored)
	}
	if strings.Contains(eval[string](b, `location.href + document.documentElement.outerHTML`), s.cluster.AdminToken) {
		t.Fatal("the admin token is in the page or its URL")
	}
	b.screenshot("groups")

	// The group: 3 members, 12 partitions, 3 holders, the stream live.
	b.run("group page", 20*time.Second, chromedp.Navigate(base+"/console/groups/demo"))
	b.waitFor("3 members and 12 owned partitions", time.Now(), 10*time.Second,
		`document.querySelectorAll('#members tr[data-member]').length === 3 &&
		 document.querySelectorAll('.cell[data-state="owned"]').length === 12 &&
		 new Set([...document.querySelectorAll('.cell')].map(c => c.dataset.holder)).size === 3 &&
		 document.getElementById('live').textContent === 'live'`)
	b.screenshot("group")

	// A 4th member joins: the grid and the timeline follow without a reload.
	eval[bool](b, `window.notReloaded = true`)
	m4 := s.addMember(t)
	id4 := m4.Consumer.MemberID()
	joinShown := b.waitFor("the 4th member's join on the timeline and in the members", m4.JoinStarted, time.Second,
		`document.querySelector('#members tr[data-member=`+js(id4)+`]') !== null &&
		 [...document.querySelectorAll('#timeline li[data-kind="join"]')].some(li => li.textContent.includes(`+js(id4)+`))`)
	gridShown := b.waitFor("the 4th member holding partitions in the grid", m4.JoinStarted, time.Second,
		`[...document.querySelectorAll('.cell[data-state="owned"]')].filter(c => c.dataset.holder === `+js(id4)+`).length === 3 &&
		 [...document.querySelectorAll('#timeline li[data-kind="grant"]')].some(li => li.textContent.includes(`+js(id4)+`) && li.querySelector('.pause'))`)
	if !eval[bool](b, `window.notReloaded === true`) {
		t.Fatal("the page reloaded")
	}
	t.Logf("join → shown: members and timeline %s, grid with the grants and their pauses %s", joinShown.Round(time.Millisecond), gridShown.Round(time.Millisecond))
	b.waitFor("fences and acks of the move on the timeline", time.Now(), 15*time.Second,
		`document.querySelectorAll('#timeline li[data-kind="fence"]').length >= 3 &&
		 ['gateway-1', 'gateway-2'].every(g => [...document.querySelectorAll('#timeline li[data-kind="ack"]')].some(li => li.textContent.includes('gateway ' + g + ' acked')))`)
	b.screenshot("handoff")

	revokeFromConsole(t, s, b)
	csrfRefusedInBrowser(t, s, b)
	otherViews(t, s, b)
}

// revokeFromConsole revokes a partition of c1 through the dialog — which
// says the partition goes back to c1 in a balanced group, as it does
// here (4 members, 3 partitions each; console5 took "A → A"
// for a broken revoke), and that Lease… moves it elsewhere — and sees
// the outcome (every gateway safe, the new epoch), the fence, the ack and
// the regrant to c1 at the new epoch.
func revokeFromConsole(t *testing.T, s *stack, b *browser) {
	t.Helper()
	id1 := s.members[0].Consumer.MemberID()
	target := eval[struct {
		Partition string `json:"partition"`
		Epoch     string `json:"epoch"`
	}](b, `(() => { const c = [...document.querySelectorAll('.cell[data-state="owned"]')].find(c => c.dataset.holder === `+js(id1)+`);
		return {partition: c.dataset.partition, epoch: c.dataset.epoch}; })()`)
	epoch, _ := strconv.ParseUint(target.Epoch, 10, 64)
	p := strings.TrimPrefix(target.Partition, "demo/")
	cell := `.cell[data-partition="demo/` + p + `"]`
	b.click("open the revoke dialog", cell+` button[data-action="revoke-partition"]`)
	b.run("the revoke dialog", 10*time.Second, chromedp.WaitVisible(chromedp.ID("confirm-ok")))
	b.waitFor("confirmation asked", time.Now(), 15*time.Second,
		`document.getElementById('confirm').open && document.getElementById('confirm-title').textContent === 'Revoke partition demo/`+p+`'`)
	// It says where the partition goes next: back to its holder (the
	// assignor places it by the members), and what moves it elsewhere.
	if text := eval[string](b, `document.getElementById('confirm-text').textContent`); !strings.Contains(text, "(sticky) then places it by the members and their shares, not by the revoke: in a balanced group it goes back to "+id1+",") ||
		!strings.Contains(text, "use Lease… on this partition") || !strings.Contains(text, "Revoke member") {
		t.Fatalf("the revoke dialog does not say the partition goes back to %s, nor what moves it: %q", id1, text)
	}
	b.screenshot("revoke-confirm")
	b.run("confirm", 10*time.Second, chromedp.Click(chromedp.ID("confirm-ok")))
	want := fmt.Sprintf("Every gateway is safe: demo/%s is fenced at epoch %d", p, epoch+1)
	b.waitFor("the revoke's outcome", time.Now(), 15*time.Second,
		`document.getElementById('confirm-outcome').textContent.startsWith(`+js(want)+`)`)
	b.waitFor("fence, ack, revoke done and regrant on the timeline and grid", time.Now(), 10*time.Second,
		`(() => { const lines = [...document.querySelectorAll('#timeline li')].map(li => li.dataset.kind + ' ' + li.textContent);
		  const has = (kind, text) => lines.some(l => l.startsWith(kind + ' ') && l.includes(text));
		  const c = document.querySelector(`+js(cell)+`);
		  return has('fence', 'demo/`+p+` fenced at epoch `+strconv.FormatUint(epoch+1, 10)+`') && has('ack', 'demo/`+p+`') &&
		    has('revoked', 'every gateway safe at epoch `+strconv.FormatUint(epoch+1, 10)+`') &&
		    c.dataset.state === 'owned' && Number(c.dataset.epoch) === `+strconv.FormatUint(epoch+1, 10)+` && c.dataset.holder === `+js(id1)+`; })()`)
	b.screenshot("revoke")
	b.run("close the dialog", 5*time.Second, chromedp.Click(chromedp.ID("confirm-cancel")))
}

// csrfRefusedInBrowser: the page's own origin and session cookie, but no
// CSRF token: refused, nothing changed.
func csrfRefusedInBrowser(t *testing.T, s *stack, b *browser) {
	t.Helper()
	before := s.cluster.Describe(t, group).Partitions[1].Epoch
	status := eval[int](b, `fetch('/console/api/v1/admin/groups/demo/partitions/demo/1/revoke', {method: 'POST',
		credentials: 'same-origin', headers: {'Content-Type': 'application/json'}, body: '{}'}).then(r => r.status)`)
	if status != 403 {
		t.Fatalf("POST without the CSRF token from the page: %d, want 403", status)
	}
	if after := s.cluster.Describe(t, group).Partitions[1].Epoch; after != before {
		t.Fatalf("a refused request moved demo/1 from epoch %d to %d", before, after)
	}
}

// otherViews: the timeline of every group, each line naming its group
// (it named none: with many groups, whose grant was it?), the gateways
// with their acked sequence, the overrides page.
func otherViews(t *testing.T, s *stack, b *browser) {
	t.Helper()
	base := s.cluster.CoordinatorURL
	if !eval[bool](b, `getComputedStyle(document.querySelector('#timeline li .grp')).display === 'none'`) {
		t.Fatal("the group page's own timeline names its group on every line")
	}
	b.run("timeline page", 20*time.Second, chromedp.Navigate(base+"/console/timeline"))
	groupOf := func(kind string) string {
		return `[...document.querySelectorAll('#timeline li[data-kind="` + kind + `"] .grp a')].filter(a => a.textContent === 'demo' && a.getAttribute('href') === '/console/groups/demo' && a.offsetParent !== null).length`
	}
	b.waitFor("timeline page live with grants, each naming its group", time.Now(), 10*time.Second,
		`document.getElementById('live').textContent === 'live' && document.querySelectorAll('#timeline li[data-kind="grant"] .pause').length >= 3 && `+
			groupOf("grant")+` === document.querySelectorAll('#timeline li[data-kind="grant"]').length`)
	configs := eval[int](b, groupOf("config"))
	if status, raw := s.cluster.Admin(t, "PUT", "/v1/admin/groups/demo/config", map[string]any{"max_moves_per_second": 0}, nil); status != 200 {
		t.Fatalf("config: %d %s", status, raw)
	}
	b.waitFor("a live line names its group too", time.Now(), 15*time.Second, groupOf("config")+` === `+strconv.Itoa(configs+1))
	b.screenshot("timeline")
	b.run("gateways page", 20*time.Second, chromedp.Navigate(base+"/console/gateways"))
	b.waitFor("both gateways syncing, acked", time.Now(), 10*time.Second,
		`['gateway-1', 'gateway-2'].every(id => { const r = document.querySelector('#gateways tr[data-gateway="' + id + '"]');
		  return r && Number(r.children[1].textContent) > 0 && r.textContent.includes('syncing'); })`)
	b.screenshot("gateways")
}
