package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestConsoleGridPages: the group page's grid showed every partition of
// the group — at the default limit of 10,000 a 9 MB page rendered in
// 0.66 s of the coordinator's CPU at every re-read (every 5 s, and after
// each handoff event), and 3–7 s of the browser's main thread to swap
// in: a page that never answered a click. Now it shows 500 partitions
// a page with links to the next and the first, its re-read keeps the
// page, each cell with its lag (over 1,000 partitions the API's describe
// has none), and a filter shows only the partitions not owned
// (revoking, unowned) — where an operator looks in a large group. The counts
// above the grid stay the whole group's.
func TestConsoleGridPages(t *testing.T) {
	timing := sdk.DefaultTiming()
	timing.HandoffTimeout = 5 * time.Minute // the member below never releases, nor heartbeats (its session: 5 min)
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "big", Partitions: 1200, Timing: timing})
	rawJoin(t, cluster, "big", cluster.ClientCredential(t, "big"))

	b := loggedIn(t, cluster)
	b.run("group page", 20*time.Second, chromedp.Navigate(cluster.CoordinatorURL+"/console/groups/big"))
	cells := `[...document.querySelectorAll('.cell')].map(c => c.dataset.partition)`
	page := func(what, search string, first, last string, n int, shown string) {
		t.Helper()
		b.waitFor(what, time.Now(), 20*time.Second, `(() => { const c = `+cells+`;
			return location.search === `+js(search)+` && c.length === `+strconv.Itoa(n)+` && c[0] === `+js(first)+` && c[c.length - 1] === `+js(last)+` &&
				document.getElementById('grid-shown')?.textContent === `+js(shown)+` })()`)
	}
	page("the first 500", "", "big/0", "big/499", 500, "partitions 1–500 of 1200")
	if eval[bool](b, `document.getElementById('grid-first') !== null`) {
		t.Fatal("a first-page link on the first page")
	}
	b.click("next", "#grid-next")
	page("the second 500", "?from=500", "big/500", "big/999", 500, "partitions 501–1000 of 1200")
	// A re-read keeps the page (the fragment is read with the page's query).
	eval[bool](b, `(document.querySelector('.cell').dataset.old = '1', true)`)
	b.waitFor("re-read", time.Now(), 20*time.Second, `document.querySelector('.cell')?.dataset.old === undefined`)
	page("still the second 500", "?from=500", "big/500", "big/999", 500, "partitions 501–1000 of 1200")
	// Each cell of the page has its lag: the admin API looks lag up only
	// for a describe of at most describe_lag_max (1,000) partitions, so
	// every cell of this group said "lag –"; the page reads its own.
	b.waitFor("the page's lag", time.Now(), 20*time.Second,
		`[...document.querySelectorAll('.cell')].every(c => c.querySelector('.line.small').textContent.includes('lag 0'))`)
	b.click("next", "#grid-next")
	page("the last 200", "?from=1000", "big/1000", "big/1199", 200, "partitions 1001–1200 of 1200")
	if eval[bool](b, `document.getElementById('grid-next') !== null`) {
		t.Fatal("a next link on the last page")
	}

	// Two partitions revoked: their holder never releases, so they stay
	// revoking; the filter shows those two alone, the counts the group's.
	for _, p := range []string{"7", "900"} {
		if status, raw := cluster.Admin(t, "POST", "/v1/admin/groups/big/partitions/big/"+p+"/revoke", map[string]any{"reason": "test"}, nil); status != http.StatusOK {
			t.Fatalf("revoke %s: %d %s", p, status, raw)
		}
	}
	b.click("only those not owned", "#grid-only")
	page("the two revoking", "?only=moving", "big/7", "big/900", 2, "partitions not owned 1–2 of 2")
	b.waitFor("the group's counts", time.Now(), 20*time.Second,
		`document.getElementById('stat-revoking').textContent === '2' && [...document.querySelectorAll('.cell')].every(c => c.dataset.state === 'revoking')`)
	b.click("every partition", "#grid-only")
	page("back to all", "", "big/0", "big/499", 500, "partitions 1–500 of 1200")
	b.noProblems("grid pages")

	for _, q := range []string{"?from=01", "?from=-1", "?only=owned", "?from=1&from=2", "?limit=5"} {
		if status := eval[int](b, `fetch('/console/groups/big/live`+q+`').then(r => r.status)`); status != 400 {
			t.Errorf("live%s: %d, want 400", q, status)
		}
		if status := eval[int](b, `fetch('/console/groups/big`+q+`').then(r => r.status)`); status != 400 {
			t.Errorf("page%s: %d, want 400", q, status)
		}
	}
}

// rawJoin joins group as a member that never heartbeats (its session 5
// minutes) nor releases a partition.
func rawJoin(t *testing.T, cluster *sdk.Cluster, group, credential string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"topics": []string{cluster.Topic}, "session_timeout_ms": 300000})
	req, _ := http.NewRequest("POST", cluster.CoordinatorURL+"/v1/groups/"+group+"/join", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+credential)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("join %s: %d", group, resp.StatusCode)
	}
}

// TestConsoleMembersTableBounded: the members table had a row per
// member — up to members_per_group (10,000), two buttons each, at every
// re-read. It shows the first 500 and says how many there are and where
// to read them all; the count above is the group's.
func TestConsoleMembersTableBounded(t *testing.T) {
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: 1,
		CoordinatorConfig: func(cfg *coordinator.Config) { cfg.JoinRate, cfg.JoinBurst = 1000, 1000 }}) // 510 joins of one credential
	credential := cluster.ClientCredential(t, "crowd")
	for range 510 {
		rawJoin(t, cluster, "crowd", credential)
	}
	b := loggedIn(t, cluster)
	b.run("group page", 20*time.Second, chromedp.Navigate(cluster.CoordinatorURL+"/console/groups/crowd"))
	b.waitFor("500 rows of 510 members", time.Now(), 20*time.Second,
		`document.querySelectorAll('#members tr[data-member]').length === 500 && document.getElementById('stat-members').textContent === '510' && `+
			`document.getElementById('members-more')?.textContent === 'The first 500 of 510 members, by id; every one: capgate admin group crowd.'`)
	b.noProblems("members")
}
