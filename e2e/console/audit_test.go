package console

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestConsoleAuditFilter: the Audit page showed the newest 100 entries
// and nothing else — a busy admin (capgate produce mints a capability
// per partition it writes: 12 entries a call) buried an operator's
// actions within seconds, and the page could neither filter nor page.
// Now it has the admin API's filter (action, who, target prefix, a
// hidden action, a hidden target prefix — capgate-produce@ hides capgate
// produce's mints and no operator's) in a form whose URL can be shared, and an "older
// entries" link; a filter the API refuses is the Problem page with 400.
// The URL names only the fields filled in (the form submitted the empty
// ones too: ?action=&who=&target=&exclude_action=capabilities).
func TestConsoleAuditFilter(t *testing.T) {
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: 4})
	base := cluster.CoordinatorURL
	if status, raw := cluster.Admin(t, "PUT", "/v1/admin/qos", map[string]any{"selector": map[string]any{"group": "needle"}, "max_bytes_per_sec": 500, "ttl_ms": 600000}, nil); status != 200 {
		t.Fatalf("qos: %d %s", status, raw)
	}
	for range 110 { // more than the page's 100
		if status, raw := cluster.Admin(t, "POST", "/v1/admin/capabilities", map[string]any{"topic": "demo", "partition": 0, "ttl_ms": 60000, "holder": "job"}, nil); status != 200 {
			t.Fatalf("mint: %d %s", status, raw)
		}
	}
	if status, raw := cluster.Admin(t, "POST", "/v1/admin/capabilities", map[string]any{"topic": "demo", "partition": 1, "ttl_ms": 60000, "holder": "partner"}, nil); status != 200 {
		t.Fatalf("mint: %d %s", status, raw)
	}
	b := loggedIn(t, cluster)
	b.run("audit page", 20*time.Second, chromedp.Navigate(base+"/console/audit"))
	b.waitFor("the mints, and a way to older entries", time.Now(), 15*time.Second,
		`document.querySelectorAll('#audit tbody tr').length === 100 && document.getElementById('older') !== null`)
	if eval[bool](b, `document.getElementById('audit').textContent.includes('group=needle')`) {
		t.Fatal("the QoS action is on the first page: the test does not bury it")
	}

	b.run("hide the mints", 10*time.Second,
		chromedp.SetValue(chromedp.CSS(`#audit-filter input[name="exclude_action"]`), "capabilities"),
		chromedp.Submit(chromedp.ID("audit-filter")))
	b.waitFor("the QoS action found, no mint shown", time.Now(), 15*time.Second, `(() => {
		const rows = [...document.querySelectorAll('#audit tbody tr')].map(r => r.textContent);
		return location.search === '?exclude_action=capabilities' && rows.length >= 1 &&
			rows.some(r => r.includes('group=needle: max_bytes_per_sec=500')) && !rows.some(r => r.includes('capabilities')) &&
			document.querySelector('#audit-filter input[name="exclude_action"]').value === 'capabilities' })()`)

	// The mints of one holder hidden by their target (capgate produce's,
	// capgate-produce@…, as capgate admin audit --exclude-target): the
	// other mint stays.
	b.run("audit page", 20*time.Second, chromedp.Navigate(base+"/console/audit"))
	b.run("hide job's mints", 10*time.Second,
		chromedp.SetValue(chromedp.CSS(`#audit-filter input[name="exclude_target"]`), "job@"),
		chromedp.Submit(chromedp.ID("audit-filter")))
	b.waitFor("partner's mint and the QoS action, none of job's", time.Now(), 15*time.Second, `(() => {
		const rows = [...document.querySelectorAll('#audit tbody tr')].map(r => r.textContent);
		return location.search === '?exclude_target=job%40' && rows.some(r => r.includes('partner@demo/1')) &&
			rows.some(r => r.includes('group=needle')) && !rows.some(r => r.includes('job@')) })()`)

	// The older page of the unfiltered log reaches it too.
	b.run("all entries", 20*time.Second, chromedp.Navigate(base+"/console/audit"))
	b.click("older entries", `#older`)
	b.waitFor("the older page", time.Now(), 15*time.Second,
		`location.search.startsWith('?before=') && document.getElementById('audit').textContent.includes('group=needle')`)

	// Refused filters: the Problem page, 400, naming what is wrong.
	for q, want := range map[string]string{
		"?limit=5":                         "unknown filter",
		"?who=" + strings.Repeat("x", 300): "at most 256 bytes",
		"?action=qos&action=capabilities":  "more than once",
	} {
		status := eval[int](b, `fetch('/console/audit`+q+`').then(r => r.status)`)
		b.run("refused "+q, 20*time.Second, chromedp.Navigate(base+"/console/audit"+q))
		b.waitFor("problem for "+q, time.Now(), 15*time.Second, `document.querySelector('main .error')?.textContent.includes(`+js(want)+`)`)
		if status != 400 {
			t.Errorf("%s: %d, want 400", q, status)
		}
	}
	b.noProblems("audit")
}
