package console

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/capgate/capgate/coordinator"
)

// TestConsoleResetsAnOffset: an operator resets a partition's committed
// offset from the group's grid — the console had no way to (the admin
// API's PUT …/offset, `capgate admin offsets reset`, was not one of its
// actions: console5). The dialog takes earliest, latest or an offset;
// the outcome is the admin API's own, audited as the console's.
func TestConsoleResetsAnOffset(t *testing.T) {
	s, b := onGroupPage(t)
	b.click("offset dialog", `.cell[data-partition="demo/4"] button[data-action="reset-offset"]`)
	b.waitFor("offset fields", time.Now(), 15*time.Second, `document.querySelector('#confirm-fields select[name="to"]') !== null`)

	// "offset" without a number is said in the dialog, nothing sent (it
	// was "400 bad_request: offset must be >= 0, got -1").
	b.run("offset without a number", 10*time.Second,
		chromedp.SetValue(chromedp.CSS(`#confirm-fields select[name="to"]`), "offset"),
		chromedp.Click(chromedp.ID("confirm-ok")))
	b.waitFor("asked for the offset", time.Now(), 15*time.Second,
		`document.getElementById('confirm-outcome').className.includes('bad') && document.getElementById('confirm-outcome').textContent.startsWith('Enter the offset') && document.getElementById('confirm').open`)

	// An offset beyond the log's end is refused, the dialog stays open.
	b.run("an offset past the end", 10*time.Second,
		chromedp.SetValue(chromedp.CSS(`#confirm-fields select[name="to"]`), "offset"),
		chromedp.SetValue(chromedp.CSS(`#confirm-fields input[name="offset"]`), "999999999"),
		chromedp.Click(chromedp.ID("confirm-ok")))
	b.waitFor("refused", time.Now(), 15*time.Second,
		`document.getElementById('confirm-outcome').className.includes('bad') && document.getElementById('confirm-outcome').textContent.includes('416 offset_out_of_range') && document.getElementById('confirm').open`)

	b.run("earliest", 10*time.Second, chromedp.SetValue(chromedp.CSS(`#confirm-fields select[name="to"]`), "earliest"))
	confirm(b, "Reset the offset of demo/4", "Group demo is at offset 0 on demo/4")

	var audit coordinator.AuditResponse
	if status, raw := s.cluster.Admin(t, "GET", "/v1/admin/audit", nil, &audit); status != 200 {
		t.Fatalf("audit: %d %s", status, raw)
	}
	var found bool
	for _, e := range audit.Entries {
		found = found || (e.Who == "console:admin" && e.Target == "demo/demo/4" && e.Result == "ok" && strings.Contains(e.Action, "offset"))
	}
	if !found {
		t.Fatalf("no audited offset reset of demo/4 by console:admin in %+v", audit.Entries)
	}
	b.noProblems("offset reset")
}
