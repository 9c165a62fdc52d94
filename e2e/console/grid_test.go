package console

import (
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestConsoleGridShowsWhereHoldersDiffer: member ids are "<client id>-<16
// hex digits>", so a fleet of one client id differs only at the end — and
// a grid cell cut its holder's name at the right edge: every cell read
// "orders-consumer-eu-…", the colour the only way to tell holders apart
// (an operator's pass on capgate dev: "capgate-consume-a5…" in three
// colours). The end of each holder's name is on screen, inside its cell.
func TestConsoleGridShowsWhereHoldersDiffer(t *testing.T) {
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: 4})
	const fleet = "fleet"
	for _, name := range []string{"m1", "m2"} {
		cluster.NewMember(t, sdk.MemberOptions{Name: name, Group: fleet,
			Configure: func(cfg *client.Config) { cfg.ClientID = "orders-consumer-eu-west-1-payments" }})
	}
	sdk.Eventually(t, 20*time.Second, "2 members settled", func() (bool, string) { return cluster.Settled(t, fleet, 2) })
	b := loggedIn(t, cluster)
	b.run("group page", 20*time.Second, chromedp.Navigate(cluster.CoordinatorURL+"/console/groups/"+fleet))
	b.waitFor("4 owned cells, 2 holders", time.Now(), 15*time.Second,
		`document.querySelectorAll('.cell[data-state="owned"]').length === 4 &&
		 new Set([...document.querySelectorAll('.cell')].map(c => c.dataset.holder)).size === 2`)
	// For every cell: the last 8 characters of its holder, as laid out,
	// lie inside the holder line's box (not past its clipped edge).
	hidden := eval[[]string](b, `(() => {
		const bad = [];
		for (const cell of document.querySelectorAll('.cell[data-state="owned"]')) {
			const id = cell.dataset.holder, line = cell.querySelector('.holder'), box = line.getBoundingClientRect();
			if (line.textContent !== id) { bad.push(cell.dataset.partition + ': shows ' + line.textContent); continue; }
			const walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
			let seen = 0;
			for (let n = walker.nextNode(); n; n = walker.nextNode()) {
				for (let i = 0; i < n.length; i++, seen++) {
					if (seen < id.length - 8) continue;
					const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
					const c = r.getBoundingClientRect();
					if (c.width === 0 || c.left < box.left - 0.5 || c.right > box.right + 0.5) bad.push(cell.dataset.partition + ': ' + id[seen] + ' of ' + id + ' off screen');
				}
			}
		}
		return bad })()`)
	if len(hidden) > 0 {
		t.Fatalf("holders' ends not shown: %q", hidden)
	}
	b.noProblems("grid")
}

// TestConsoleGridShowsThrottles: a QoS override set from the Overrides
// page or the CLI was nowhere on the group's page — where an operator
// looks for why a partition lags (an operator's pass on capgate dev: a
// 2000 B/s throttle on demo/3 of a group, its cell plain). A cell now
// says what applies to it as it is held (a throttle, a log level, a
// monitor tag); an override of another partition, group or holder does
// not show, and one ended leaves the cell plain again without a reload.
// The group's Handoffs panel lists the overrides of the group (and those
// of every group) as they are set and end: their timeline events had no
// group, so no group page showed them, nor re-read its grid for them.
func TestConsoleGridShowsThrottles(t *testing.T) {
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: 4})
	m := cluster.NewMember(t, sdk.MemberOptions{Name: "m1", Group: group})
	sdk.Eventually(t, 20*time.Second, "1 member settled", func() (bool, string) { return cluster.Settled(t, group, 1) })
	qos := func(body map[string]any) {
		t.Helper()
		if status, raw := cluster.Admin(t, "PUT", "/v1/admin/qos", body, nil); status != 200 {
			t.Fatalf("qos: %d %s", status, raw)
		}
	}
	p3 := map[string]any{"group": group, "topic": "demo", "partition": 3}
	qos(map[string]any{"selector": p3, "max_bytes_per_sec": 2000, "ttl_ms": 600000})
	qos(map[string]any{"selector": map[string]any{"holder": m.Consumer.MemberID()}, "log_level": "debug", "ttl_ms": 600000})
	qos(map[string]any{"selector": map[string]any{"group": "other"}, "max_bytes_per_sec": 1, "ttl_ms": 600000})
	qos(map[string]any{"selector": map[string]any{"holder": "someone-else"}, "monitor": "elsewhere", "ttl_ms": 600000})
	b := loggedIn(t, cluster)
	b.run("group page", 20*time.Second, chromedp.Navigate(cluster.CoordinatorURL+"/console/groups/"+group))
	cellQoS := func(p int) string {
		return `(document.querySelector('.cell[data-partition="demo/` + strconv.Itoa(p) + `"] .qos')?.textContent ?? '')`
	}
	b.waitFor("demo/3 throttled, every cell at log debug, nothing of the others", time.Now(), 15*time.Second,
		cellQoS(3)+` === 'throttled 2000 B/s · log debug' && [0, 1, 2].every(p => `+
			`document.querySelector('.cell[data-partition="demo/' + p + '"] .qos')?.textContent === 'log debug')`)

	// The page's Handoffs panel has the overrides of this group and those
	// naming no group (they apply here too), not another group's; one
	// ended comes in live.
	lines := `[...document.querySelectorAll('#timeline li[data-kind="qos"]')].map(li => li.textContent)`
	b.waitFor("the group's overrides in its Handoffs panel", time.Now(), 15*time.Second,
		lines+`.some(l => l.includes('of group=demo, topic=demo, partition=3: 2000 B/s until')) && `+
			lines+`.some(l => l.includes('of holder=`+m.Consumer.MemberID()+`: log level debug until')) && !`+lines+`.some(l => l.includes('group=other'))`)

	qos(map[string]any{"selector": p3, "ttl_ms": 1}) // ended
	b.waitFor("demo/3's throttle gone, no reload", time.Now(), 20*time.Second, cellQoS(3)+` === 'log debug'`)
	b.waitFor("its end in the Handoffs panel", time.Now(), 15*time.Second,
		lines+`.some(l => l.includes('of group=demo, topic=demo, partition=3 ended'))`)
	b.noProblems("grid throttles")
}
