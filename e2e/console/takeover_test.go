package console

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/capgate/capgate/e2e/sdk"
	capstack "github.com/capgate/capgate/internal/stack"
)

// TestConsoleAfterATakeover: with replicas the console is the leader's.
// A page open at a leader that then stopped kept its last grid, "offline"
// in the header at most — an operator read it as the group's state —
// and once that replica was back as a standby, the page's reads were
// redirected to the new leader (refused: another origin) and an action
// answered "421 not_leader". Now the page says, above its content greyed
// out, that the coordinator does not answer, then that it no longer
// leads with a link to this page at the leader; an action sent there
// says it was not done and links there too. No script error or CSP
// violation on the way (the redirect is not followed). At the new leader
// the Timeline and Audit pages say they hold what came since its
// takeover (both are kept in memory).
func TestConsoleAfterATakeover(t *testing.T) {
	ctx := context.Background()
	cluster, first, b := groupPageAtTheLeader(t)
	// A dialog open across the takeover: its action is sent after it.
	b.run("a dialog", 10*time.Second,
		chromedp.SetValue(chromedp.ID("max-moves"), "3"),
		chromedp.Click(chromedp.CSS(`button[data-action="group-config"]`)))
	b.waitFor("the dialog", time.Now(), 15*time.Second, `document.getElementById('confirm').open`)

	banner := `(document.getElementById('elsewhere')?.textContent ?? '')`
	killed := time.Now()
	first.Kill()
	b.waitFor("the page says the coordinator does not answer", time.Now(), 30*time.Second,
		banner+`.startsWith('This coordinator does not answer') && document.querySelector('main').classList.contains('stale')`)

	second, err := cluster.WaitLeader(ctx)
	if err != nil || second == first {
		t.Fatalf("no other replica took over: %v %v", second, err)
	}
	if err := first.Start(ctx); err != nil { // back, as a standby
		t.Fatal(err)
	}
	atLeader := second.URL + "/console/groups/" + group
	b.waitFor("the page says who leads, with a link to it", time.Now(), 30*time.Second,
		banner+`.startsWith('This coordinator no longer leads: replica `+second.URL+` does') && document.getElementById('at-leader')?.href === `+js(atLeader))

	b.run("confirm at the standby", 10*time.Second, chromedp.Click(chromedp.ID("confirm-ok")))
	b.waitFor("the action says it was not done, and where to do it", time.Now(), 15*time.Second,
		`document.getElementById('confirm-outcome').textContent.startsWith('This coordinator no longer leads: this was not done.') && `+
			`document.querySelector('#confirm-outcome a')?.href === `+js(atLeader))
	if got := cluster.Describe(t, group).Config.MaxMovesPerSecond; got != 1 {
		t.Fatalf("max_moves_per_second %d after an action refused by a standby", got)
	}
	b.noProblems("page at a standby")
	b.run("close", 5*time.Second, chromedp.Click(chromedp.ID("confirm-cancel")))
	b.click("to the leader", "#at-leader")
	b.waitFor("the leader's console (its login: sessions are a replica's)", time.Now(), 15*time.Second,
		`location.origin === `+js(second.URL)+` && (location.pathname === '/console/login' || location.pathname === '/console/groups/`+group+`')`)
	if strings.Contains(eval[string](b, `location.href`), "token") {
		t.Fatal("a token in the URL")
	}
	b.noProblems("at the leader")

	// The new leader's Timeline and Audit pages hold what happened since
	// its takeover only (memory): they say since when. They did not, and
	// read as if nothing had happened before.
	login(b, second.URL, cluster.AdminToken)
	b.waitFor("logged in at the leader", time.Now(), 15*time.Second, `location.pathname === '/console/groups'`)
	for _, p := range []string{"/console/timeline", "/console/audit"} {
		b.run(p, 20*time.Second, chromedp.Navigate(second.URL+p))
		b.waitFor(p+" says it holds what came since the takeover", time.Now(), 15*time.Second,
			`(() => { const e = document.getElementById('kept-since'); return e && e.textContent.includes('since it began serving') && `+
				`new Date(e.dataset.since) >= new Date(`+js(killed.UTC().Format(time.RFC3339Nano))+`) })()`)
	}
	b.noProblems("the leader's timeline and audit")
}

// TestConsolePageAtAStoppedReplicaOffersTheOthers: a page left open at a
// leader that stopped and never came back said only that the coordinator
// does not answer — it knew no other replica, so the operator had to
// find the others' URLs themselves. The replicas are configured with
// every replica's URL (replica.peers, as capgate dev --replicas sets
// it): the page now offers the others, this very page at each; a
// standby sends it on to the leader.
func TestConsolePageAtAStoppedReplicaOffersTheOthers(t *testing.T) {
	ctx := context.Background()
	cluster, first, b := groupPageAtTheLeader(t)
	var others []string
	for _, co := range cluster.Stack.Coordinators() {
		if co != first {
			others = append(others, co.URL+"/console/groups/"+group)
		}
	}

	first.Kill() // for good
	links := `[...document.querySelectorAll('#elsewhere #peers a.peer')].map(a => a.href)`
	b.waitFor("the page offers the other replicas", time.Now(), 30*time.Second,
		`(document.getElementById('elsewhere')?.textContent ?? '').startsWith('This coordinator does not answer') && `+
			`JSON.stringify(`+links+`.sort()) === `+js(jsonList(others)))
	second, err := cluster.WaitLeader(ctx)
	if err != nil || second == first {
		t.Fatalf("no other replica took over: %v %v", second, err)
	}
	// Whichever replica the operator picks, the leader's console is where
	// the browser ends (a standby's page answer is a 307 to the leader).
	b.click("another replica", "#peers a.peer")
	b.waitFor("the leader's console", time.Now(), 20*time.Second,
		`location.origin === `+js(second.URL)+` && (location.pathname === '/console/login' || location.pathname === '/console/groups/`+group+`')`)
	b.noProblems("after following a replica link")
}

// jsonList is list sorted, as JSON.stringify writes an array of strings.
func jsonList(list []string) string {
	sorted := slices.Clone(list)
	slices.Sort(sorted)
	b, _ := json.Marshal(sorted)
	return string(b)
}

// groupPageAtTheLeader starts 3 replicas with the group, and a browser
// logged in at the leader showing the group's page, live.
func groupPageAtTheLeader(t *testing.T) (*sdk.Cluster, *capstack.Coordinator, *browser) {
	t.Helper()
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: 4, Coordinators: 3})
	first, err := cluster.WaitLeader(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if status, raw := cluster.Admin(t, "PUT", "/v1/admin/groups/"+group+"/config", map[string]any{"max_moves_per_second": 1}, nil); status != 200 {
		t.Fatalf("group: %d %s", status, raw)
	}
	b := newBrowser(t)
	login(b, first.URL, cluster.AdminToken)
	b.waitFor("logged in", time.Now(), 15*time.Second, `location.pathname === '/console/groups'`)
	b.run("group page", 20*time.Second, chromedp.Navigate(first.URL+"/console/groups/"+group))
	b.waitFor("live", time.Now(), 15*time.Second, `document.getElementById('live')?.textContent === 'live'`)
	return cluster, first, b
}
