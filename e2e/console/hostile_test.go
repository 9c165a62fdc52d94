package console

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
)

// hostile is a name valid to capgate (ocap.ValidName: printable, no space,
// no '/') that tries every context the console renders names in: text
// (<i>, <script>), double- and single-quoted attributes (a new attribute
// needs no space after a closing quote), URLs (? # % and an escaped dot).
func hostile(what string) string {
	return what + `?x=1#%2e"onfocus="window.__xss='` + what + `'"autofocus="'><i>x<script>window.__xss='` + what + `'<`
}

// TestConsoleHostileNames: names a consumer or an admin client chooses —
// group, client id, instance id (and so the member id), the credential's
// holder, a lease holder, a QoS monitor tag, an audit reason — are shown
// as text on every page and in the timeline, never run as script nor
// parsed as markup, and the group's links and actions address the group
// by its exact name.
func TestConsoleHostileNames(t *testing.T) {
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: 4})
	base := cluster.CoordinatorURL
	g, clientID, instanceID := hostile("group"), hostile("client"), hostile("instance")
	m := cluster.NewMember(t, sdk.MemberOptions{Name: "hostile", Group: g,
		Configure: func(cfg *client.Config) { cfg.ClientID, cfg.InstanceID = clientID, instanceID }})
	memberID := m.Consumer.MemberID()
	groupPath := "/v1/admin/groups/" + url.PathEscape(g)
	monitor := `"onfocus="window.__xss=1"'><i>m<script>` // a monitor tag is at most 64 bytes

	var lease coordinator.LeaseResponse
	if status, raw := cluster.Admin(t, "POST", groupPath+"/partitions/demo/1/lease",
		map[string]any{"holder": hostile("holder"), "ttl_ms": 600000}, &lease); status != http.StatusOK {
		t.Fatalf("lease: %d %s", status, raw)
	}
	if status, raw := cluster.Admin(t, "PUT", "/v1/admin/qos", map[string]any{
		"selector": map[string]any{"group": g}, "monitor": monitor, "ttl_ms": 600000}, nil); status != http.StatusOK {
		t.Fatalf("qos: %d %s", status, raw)
	}
	if status, raw := cluster.Admin(t, "POST", "/v1/admin/capabilities/"+url.PathEscape(lease.JTI)+"/revoke",
		map[string]any{"reason": hostile("reason")}, nil); status != http.StatusOK {
		t.Fatalf("deny: %d %s", status, raw)
	}

	b := newBrowser(t)
	login(b, base, cluster.AdminToken)
	b.waitFor("logged in", time.Now(), 10*time.Second, `location.pathname === '/console/groups'`)
	clean := func(where string) {
		t.Helper()
		if got := eval[string](b, `String(window.__xss ?? '') + '|' + document.querySelectorAll('main i, main script, body [onfocus]').length`); got != "|0" {
			t.Fatalf("%s: injected (window.__xss|elements): %q", where, got)
		}
		b.noProblems(where)
	}

	b.waitFor("the group listed under its name", time.Now(), 10*time.Second,
		`[...document.querySelectorAll('#groups tr[data-group]')].some(r => r.dataset.group === `+js(g)+` && r.querySelector('a').textContent === `+js(g)+`)`)
	clean("groups page")
	eval[bool](b, `([...document.querySelectorAll('#groups tr[data-group]')].find(r => r.dataset.group === `+js(g)+`).querySelector('a').click(), true)`)
	b.waitFor("the group page of that exact group", time.Now(), 10*time.Second,
		`document.querySelector('h1 b')?.textContent === `+js(g)+` && document.querySelector('#members tr[data-member]')?.dataset.member === `+js(memberID)+
			` && document.getElementById('live').textContent === 'live'`)
	b.waitFor("client, instance and lease holder shown as text", time.Now(), 10*time.Second,
		`(() => { const r = document.querySelector('#members tr[data-member]');
		  return r.children[2].textContent === `+js(clientID)+` && r.children[3].textContent === `+js(instanceID)+` &&
		    document.querySelector('.cell[data-partition="demo/1"]').dataset.holder === `+js(hostile("holder"))+`; })()`)
	clean("group page")

	// An action on the group from its page: the dialog names it, the admin
	// API gets its exact name (and the timeline and grid follow).
	b.click("revoke dialog", `.cell[data-partition="demo/0"] button[data-action="revoke-partition"]`)
	confirm(b, "Revoke partition demo/0", "Every gateway is safe: demo/0 is fenced at epoch")
	b.waitFor("the revoke on the group's timeline", time.Now(), 10*time.Second,
		`[...document.querySelectorAll('#timeline li[data-kind="revoked"]')].some(li => li.textContent.includes('demo/0'))`)
	clean("group page after a revoke")

	for _, page := range []struct{ path, shows string }{
		{"/console/timeline", memberID},
		{"/console/overrides", monitor},
		{"/console/audit", hostile("reason")},
	} {
		b.run(page.path, 20*time.Second, chromedp.Navigate(base+page.path))
		b.waitFor(page.path+" shows the name as text", time.Now(), 10*time.Second, `document.querySelector('main').textContent.includes(`+js(page.shows)+`)`)
		clean(page.path)
	}
}
