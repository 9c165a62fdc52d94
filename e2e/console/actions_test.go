package console

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestConsoleActionsInBrowser drives the other actions through their
// confirmation dialogs and checks each outcome against the world: the
// creeping rate is the group's config, an outside lease's capability
// reads through a gateway, denying its id makes the gateway refuse it, a
// QoS override is listed, a revoked member's partitions move away and it
// rejoins under the credential the members table shows (newuser3 #5:
// the dialog says so and names it), and "Deny credential" on its row
// stops the consumer, audited as the console's.
func TestConsoleActionsInBrowser(t *testing.T) {
	s, b := onGroupPage(t)
	base := s.cluster.CoordinatorURL

	// The creeping rate.
	b.run("set max moves", 10*time.Second,
		chromedp.SetValue(chromedp.ID("max-moves"), "2"),
		chromedp.Click(chromedp.CSS(`button[data-action="group-config"]`)))
	confirm(b, "Change the creeping rate of demo", "Group demo now moves at most 2 partitions per second.")
	b.waitFor("the stats follow", time.Now(), 15*time.Second,
		`[...document.querySelectorAll('.stats div')].some(d => d.textContent.includes('moves/s') && d.querySelector('b').textContent === '2')`)
	if got := s.cluster.Describe(t, group).Config.MaxMovesPerSecond; got != 2 {
		t.Fatalf("max_moves_per_second after the console set it: %d", got)
	}

	// Lease demo/5 to an outside holder; its capability reads demo/5.
	b.click("lease dialog", `.cell[data-partition="demo/5"] button[data-action="lease-partition"]`)
	b.waitFor("lease fields", time.Now(), 15*time.Second, `document.querySelector('#confirm-fields input[name="holder"]') !== null`)
	b.run("fill the lease", 10*time.Second,
		chromedp.SetValue(chromedp.CSS(`#confirm-fields input[name="holder"]`), "partner-job"),
		chromedp.SetValue(chromedp.CSS(`#confirm-fields input[name="ttl"]`), "120"))
	b.screenshot("lease") // the filled dialog
	outcome := confirm(b, "Lease partition demo/5", "partner-job holds demo/5 at epoch")
	m := regexp.MustCompile(`id (\S+)\), to hand to the holder: (\S+)$`).FindStringSubmatch(outcome)
	if m == nil {
		t.Fatalf("lease outcome without a capability: %q", outcome)
	}
	jti, capability := m[1], m[2]
	b.waitFor("the grid shows the lease", time.Now(), 15*time.Second,
		`(() => { const c = document.querySelector('.cell[data-partition="demo/5"]'); return c.dataset.holder === 'partner-job' && c.textContent.includes('leased to partner-job'); })()`)
	gw := s.cluster.GatewayURLs()[0]
	if status := fetch(t, gw, capability); status != http.StatusOK {
		t.Fatalf("fetch with the leased capability: %d", status)
	}

	// Deny the lease's capability id: every gateway refuses it.
	b.run("overrides page", 20*time.Second, chromedp.Navigate(base+"/console/overrides"))
	b.run("deny dialog", 10*time.Second, chromedp.Click(chromedp.CSS(`button[data-action="deny-capability"]`)))
	b.waitFor("deny fields", time.Now(), 15*time.Second, `document.querySelector('#confirm-fields input[name="jti"]') !== null`)
	b.run("fill the jti", 10*time.Second, chromedp.SetValue(chromedp.CSS(`#confirm-fields input[name="jti"]`), jti))
	confirm(b, "Deny a capability id", "Denied "+jti+" until ")
	deadline := time.Now().Add(10 * time.Second)
	for status := fetch(t, gw, capability); status != http.StatusConflict; status = fetch(t, gw, capability) {
		if time.Now().After(deadline) {
			t.Fatalf("fetch with the denied capability still %d", status)
		}
		time.Sleep(20 * time.Millisecond) // the gateway applies the denial at its next sync
	}

	// Leasing demo/5 to another holder is refused, naming partner-job;
	// moved when the dialog says so.
	b.run("group page again", 20*time.Second, chromedp.Navigate(base+"/console/groups/demo"))
	leaseTo := func(holder, force, want string) {
		b.click("lease dialog", `.cell[data-partition="demo/5"] button[data-action="lease-partition"]`)
		b.waitFor("lease fields", time.Now(), 5*time.Second, `document.querySelector('#confirm-fields select[name="force"]') !== null`)
		b.run("fill the lease", 10*time.Second,
			chromedp.SetValue(chromedp.CSS(`#confirm-fields input[name="holder"]`), holder),
			chromedp.SetValue(chromedp.CSS(`#confirm-fields select[name="force"]`), force))
		confirm(b, "Lease partition demo/5", want)
	}
	leaseTo("other-job", "no", `409 conflict: lease: demo/5 of group "demo" is leased to "partner-job"`)
	leaseTo("other-job", "yes", "other-job holds demo/5 at epoch")
	b.waitFor("the grid shows the moved lease", time.Now(), 5*time.Second,
		`document.querySelector('.cell[data-partition="demo/5"]').textContent.includes('leased to other-job')`)
	b.run("overrides page again", 20*time.Second, chromedp.Navigate(base+"/console/overrides"))

	// A QoS override, listed afterwards.
	b.run("qos dialog", 10*time.Second, chromedp.Click(chromedp.CSS(`button[data-action="qos"]`)))
	b.waitFor("qos fields", time.Now(), 15*time.Second, `document.querySelector('#confirm-fields input[name="topic"]') !== null`)
	b.run("fill the override", 10*time.Second,
		chromedp.SetValue(chromedp.CSS(`#confirm-fields input[name="topic"]`), "demo"),
		chromedp.SetValue(chromedp.CSS(`#confirm-fields input[name="partition"]`), "3"),
		chromedp.SetValue(chromedp.CSS(`#confirm-fields input[name="max_bytes_per_sec"]`), "100000"))
	confirm(b, "Set a QoS override", "is on every gateway until")
	var list coordinator.QoSListResponse
	if status, raw := s.cluster.Admin(t, "GET", "/v1/admin/qos", nil, &list); status != 200 || len(list.Overrides) != 1 ||
		list.Overrides[0].MaxBytesPerSec != 100000 || list.Overrides[0].Selector.Topic != "demo" {
		t.Fatalf("QoS overrides after the console set one: %d %s", status, raw)
	}
	b.run("reload overrides", 20*time.Second, chromedp.Navigate(base+"/console/overrides"))
	b.waitFor("the override is listed", time.Now(), 15*time.Second,
		`document.querySelector('#qos tbody').textContent.includes('topic=demo, partition=3') && document.querySelector('#qos tbody').textContent.includes('100000 B/s')`)
	b.screenshot("overrides")

	// Revoke member c3: its partitions move away, it leaves the table —
	// and, as a Kafka consumer does after RemoveMembersFromConsumerGroup,
	// joins again at once with its credential. The dialog and the outcome
	// say so and name the credential; the members table shows it.
	c3 := s.members[2]
	id3 := c3.Consumer.MemberID()
	cred3 := credentialOf(t, s, id3)
	b.run("group page", 20*time.Second, chromedp.Navigate(base+"/console/groups/demo"))
	b.waitFor("c3's credential in the members table", time.Now(), 10*time.Second,
		`document.querySelector('#members tr[data-member=`+js(id3)+`]')?.querySelector('td.credential').textContent.includes(`+js(cred3)+`)`)
	b.click("revoke member dialog", `#members tr[data-member=`+js(id3)+`] button[data-action="revoke-member"]`)
	b.waitFor("the dialog says it rejoins and names the credential", time.Now(), 15*time.Second,
		`document.getElementById('confirm').open && document.getElementById('confirm-text').textContent.includes(`+
			js("A consumer joins again at once with its credential")+`) && document.getElementById('confirm-text').textContent.includes(`+js("deny its credential "+cred3)+`)`)
	outcome = confirm(b, "Revoke member", id3+" revoked: ")
	if !strings.Contains(outcome, "to stop it, deny its credential "+cred3) {
		t.Fatalf("revoke member's outcome does not say how to stop the consumer: %q", outcome)
	}
	b.waitFor("c3 gone from members and grid, back under its credential", time.Now(), 15*time.Second,
		`document.querySelector('#members tr[data-member=`+js(id3)+`]') === null &&
		 ![...document.querySelectorAll('.cell')].some(c => c.dataset.holder === `+js(id3)+`) &&
		 document.querySelector('#members tr[data-credential=`+js(cred3)+`]') !== null`)
	b.screenshot("member-rejoined")

	// Deny credential, on the rejoined member's row: its member is revoked
	// and its joins are refused — the consumer stops.
	b.click("deny credential dialog", `#members tr[data-credential=`+js(cred3)+`] button[data-action="deny-credential"]`)
	confirm(b, "Deny credential "+cred3, "Denied "+cred3+" until ")
	sdk.Eventually(t, 15*time.Second, "c3's consumer stopped by the deny", func() (bool, string) {
		err := c3.PollErr()
		return err != nil && strings.Contains(err.Error(), "denied"), fmt.Sprint(err)
	})
	c3.Kill() // stopped already: its Close has nothing to leave
	b.waitFor("no member of c3's credential", time.Now(), 15*time.Second,
		`document.querySelector('#members tr[data-credential=`+js(cred3)+`]') === null && document.querySelectorAll('#members tr[data-member]').length === 2`)
	for _, m := range s.cluster.Describe(t, group).Members {
		if m.Credential != nil && m.Credential.ID == cred3 {
			t.Fatalf("a member of the denied credential: %+v", m)
		}
	}
	var audit coordinator.AuditResponse
	if status, raw := s.cluster.Admin(t, "GET", "/v1/admin/audit?action=capability_revoke&target="+cred3, nil, &audit); status != http.StatusOK ||
		len(audit.Entries) != 1 || audit.Entries[0].Who != "console:admin" || audit.Entries[0].Result != "ok" {
		t.Fatalf("audit of the console's deny: %d %s", status, raw)
	}
	b.noProblems("after the credential deny")
}

// credentialOf is the credential id of member id of the demo group.
func credentialOf(t *testing.T, s *stack, id string) string {
	t.Helper()
	for _, m := range s.cluster.Describe(t, group).Members {
		if m.ID == id && m.Credential != nil && m.Credential.ID != "" {
			return m.Credential.ID
		}
	}
	t.Fatalf("no credential for member %s", id)
	return ""
}

// confirm checks the open dialog's title, confirms, waits for an outcome
// containing want, closes the dialog and returns the outcome.
func confirm(b *browser, title, want string) string {
	b.t.Helper()
	b.waitFor("dialog "+title, time.Now(), 15*time.Second,
		`document.getElementById('confirm').open && document.getElementById('confirm-title').textContent === `+js(title))
	b.run("confirm "+title, 10*time.Second, chromedp.Click(chromedp.ID("confirm-ok")))
	b.waitFor("outcome of "+title, time.Now(), 15*time.Second,
		`document.getElementById('confirm-outcome').textContent.includes(`+js(want)+`)`)
	outcome := eval[string](b, `document.getElementById('confirm-outcome').textContent`)
	b.run("close "+title, 5*time.Second, chromedp.Click(chromedp.ID("confirm-cancel")))
	b.waitFor("dialog closed", time.Now(), 15*time.Second, `!document.getElementById('confirm').open`)
	return outcome
}

// fetch reads demo/5 through a gateway with capability and returns the
// status.
func fetch(t *testing.T, gateway, capability string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", gateway+"/v1/topics/demo/partitions/5/records?offset=0&max_wait_ms=0", nil)
	req.Header.Set("Authorization", "Bearer "+capability)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
