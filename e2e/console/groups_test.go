package console

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestConsoleGroupsPagesInBrowser: in a real Chromium, with more groups
// than a page holds, the groups page links to the next page and back,
// and its filter form finds a group past the first page by prefix; the
// page's 5 s re-read keeps the filter (it re-read the unfiltered page);
// the filter emptied is the bare URL (not ?prefix=);
// no script error or CSP violation on the way.
func TestConsoleGroupsPagesInBrowser(t *testing.T) {
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: 1})
	base := cluster.CoordinatorURL
	for i := range 104 {
		if status, raw := cluster.Admin(t, "PUT", fmt.Sprintf("/v1/admin/groups/g-%03d/config", i), map[string]any{"max_moves_per_second": 1}, nil); status != http.StatusOK {
			t.Fatalf("group %d: %d %s", i, status, raw)
		}
	}
	if status, raw := cluster.Admin(t, "PUT", "/v1/admin/groups/orders-eu/config", map[string]any{"max_moves_per_second": 1}, nil); status != http.StatusOK {
		t.Fatalf("orders-eu: %d %s", status, raw)
	}
	b := newBrowser(t)
	login(b, base, cluster.AdminToken)
	rows := `[...document.querySelectorAll('#groups tr[data-group]')].map(r => r.dataset.group)`
	b.waitFor("the first page", time.Now(), 10*time.Second,
		`location.pathname === '/console/groups' && `+rows+`.length === 100 && `+rows+`[99] === 'g-099' && document.getElementById('next-page') !== null`)

	b.click("next page", "#next-page")
	b.waitFor("the second page", time.Now(), 10*time.Second,
		rows+`.join() === 'g-100,g-101,g-102,g-103,orders-eu' && document.getElementById('next-page') === null && document.getElementById('first-page') !== null`)
	b.noProblems("second page")
	b.click("first page", "#first-page")
	b.waitFor("back on the first page", time.Now(), 10*time.Second, `location.search === '' && `+rows+`.length === 100`)

	// Typed and sent in one step, as click: the re-read replaces the form.
	b.waitFor("filter", time.Now(), 10*time.Second,
		`(() => { const i = document.querySelector('#groups-filter input[name="prefix"]'); if (!i) return false; i.value = 'orders'; i.form.requestSubmit(); return true })()`)
	b.waitFor("the filtered page", time.Now(), 10*time.Second,
		`location.search === '?prefix=orders' && `+rows+`.join() === 'orders-eu' && document.querySelector('#groups-filter input').value === 'orders'`)
	b.screenshot("groups-filtered")
	eval[bool](b, `(document.getElementById('groups').dataset.old = '1', true)`)
	b.waitFor("re-read, still filtered", time.Now(), 10*time.Second,
		`document.getElementById('groups').dataset.old === undefined && `+rows+`.join() === 'orders-eu'`)
	b.noProblems("filtered page")

	// The filter emptied and sent: the page's URL is the bare one, not ?prefix=.
	b.waitFor("filter emptied", time.Now(), 10*time.Second,
		`(() => { const i = document.querySelector('#groups-filter input[name="prefix"]'); if (!i) return false; i.value = ''; i.form.requestSubmit(); return true })()`)
	b.waitFor("every group, a bare URL", time.Now(), 10*time.Second, `location.search === '' && `+rows+`.length === 100`)
	b.noProblems("emptied filter")
}
