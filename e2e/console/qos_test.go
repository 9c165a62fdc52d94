package console

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestConsoleQoSThrottleLifted: the QoS dialog's "0 = no limit" did not
// lift a throttle — 0 was sent as no rate at all, which keeps the
// override's rate, so "Override … is on every gateway" answered while
// topic demo, partition 3 stayed at 1000 B/s — and the Overrides page
// went on saying "no overrides" after one was set, until reloaded
// (console5). Now 0 is sent and lifts it, an empty field keeps the rate,
// the outcome says the rate in force and the page lists what was set.
func TestConsoleQoSThrottleLifted(t *testing.T) {
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: 4})
	base := cluster.CoordinatorURL
	b := loggedIn(t, cluster)
	b.run("overrides page", 20*time.Second, chromedp.Navigate(base+"/console/overrides"))
	b.waitFor("no overrides yet", time.Now(), 10*time.Second, `document.querySelector('#qos tbody').textContent.includes('no overrides')`)

	rate := func() int64 {
		t.Helper()
		var list coordinator.QoSListResponse
		if status, raw := cluster.Admin(t, "GET", "/v1/admin/qos", nil, &list); status != 200 || len(list.Overrides) != 1 {
			t.Fatalf("QoS overrides: %d %s", status, raw)
		}
		return list.Overrides[0].MaxBytesPerSec
	}
	set := func(fields map[string]string, want string) {
		t.Helper()
		b.click("qos dialog", `button[data-action="qos"]`)
		b.waitFor("qos fields", time.Now(), 15*time.Second, `document.querySelector('#confirm-fields input[name="topic"]') !== null`)
		steps := []chromedp.Action[chromedp.Void]{
			chromedp.SetValue(chromedp.CSS(`#confirm-fields input[name="topic"]`), "demo"),
			chromedp.SetValue(chromedp.CSS(`#confirm-fields input[name="partition"]`), "3"),
		}
		for name, value := range fields {
			steps = append(steps, chromedp.SetValue(chromedp.CSS(`#confirm-fields [name="`+name+`"]`), value))
		}
		b.run("fill the override", 10*time.Second, steps...)
		confirm(b, "Set a QoS override", want)
	}
	listed := func(what, text string) {
		t.Helper()
		b.waitFor(what, time.Now(), 15*time.Second,
			`(() => { const t = document.querySelector('#qos tbody').textContent; return t.includes('topic=demo, partition=3') && `+text+` })()`)
	}

	// A throttle: the page lists it, no reload.
	set(map[string]string{"max_bytes_per_sec": "1000"}, "at most 1000 B/s")
	if got := rate(); got != 1000 {
		t.Fatalf("rate after the console set 1000: %d", got)
	}
	listed("the throttle listed on the page it was set from", `t.includes('1000 B/s')`)

	// A log level alone, the rate left empty: the throttle stays.
	set(map[string]string{"log_level": "debug"}, "at most 1000 B/s, log level debug")
	if got := rate(); got != 1000 {
		t.Fatalf("rate after a log level alone: %d, want 1000 kept", got)
	}

	// 0 lifts it.
	set(map[string]string{"max_bytes_per_sec": "0"}, "no byte rate, log level debug")
	if got := rate(); got != 0 {
		t.Fatalf("rate after the console set 0 (\"lifts the limit\"): %d", got)
	}
	listed("the lifted throttle listed", `!t.includes('B/s')`)

	// A log level and a monitor tag are cleared (an empty field keeps
	// them: console5 #7 — they could not be taken off from the console).
	set(map[string]string{"monitor": "incident-7", "max_bytes_per_sec": "2000"}, "at most 2000 B/s, log level debug, monitor incident-7.")
	set(map[string]string{"log_level": "clear", "monitor_clear": "yes"}, "at most 2000 B/s.")
	var list coordinator.QoSListResponse
	if status, raw := cluster.Admin(t, "GET", "/v1/admin/qos", nil, &list); status != 200 || len(list.Overrides) != 1 ||
		list.Overrides[0].LogLevel != "" || list.Overrides[0].Monitor != "" || list.Overrides[0].MaxBytesPerSec != 2000 {
		t.Fatalf("after clearing the log level and the monitor tag: %d %s", status, raw)
	}
	listed("the cleared override listed", `t.includes('2000 B/s') && !t.includes('debug') && !t.includes('incident-7')`)

	// The Audit page says what each QoS action throttled, not only its id
	// (console5 #8).
	b.run("audit page", 20*time.Second, chromedp.Navigate(cluster.CoordinatorURL+"/console/audit"))
	b.waitFor("the audit names what was set", time.Now(), 15*time.Second, `(() => {
		const t = document.getElementById('audit').textContent;
		return t.includes('topic=demo partition=3: log_level cleared, monitor cleared for 10m0s') &&
			t.includes('topic=demo partition=3: max_bytes_per_sec=1000 for 10m0s') })()`)
	b.noProblems("overrides")
}

// TestConsoleEndsAQoSOverride: the console could set a QoS override but
// not end one — the CLI's `qos end` can (console5 #7); a throttle set by
// mistake stayed until its ttl. Each row of the Overrides page has End:
// it ends that override alone (its id and selector, ttl_ms 1, as the CLI
// sends), every gateway drops it, and the page stops listing it.
func TestConsoleEndsAQoSOverride(t *testing.T) {
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: 4})
	for _, body := range []map[string]any{
		{"selector": map[string]any{"topic": "demo", "partition": 3}, "max_bytes_per_sec": 1000, "ttl_ms": 600000},
		{"selector": map[string]any{"group": "other"}, "log_level": "debug", "ttl_ms": 600000},
	} {
		if status, raw := cluster.Admin(t, "PUT", "/v1/admin/qos", body, nil); status != 200 {
			t.Fatalf("qos: %d %s", status, raw)
		}
	}
	list := func() coordinator.QoSListResponse {
		t.Helper()
		var l coordinator.QoSListResponse
		if status, raw := cluster.Admin(t, "GET", "/v1/admin/qos", nil, &l); status != 200 {
			t.Fatalf("QoS overrides: %d %s", status, raw)
		}
		return l
	}
	var throttle string
	for _, o := range list().Overrides {
		if o.Selector.Topic == "demo" {
			throttle = o.ID
		}
	}
	b := loggedIn(t, cluster)
	b.run("overrides page", 20*time.Second, chromedp.Navigate(cluster.CoordinatorURL+"/console/overrides"))
	row := `#qos tr[data-override=` + js(throttle) + `]`
	b.click("end the throttle", row+` button[data-action="qos-end"]`)
	b.waitFor("the dialog names what it ends", time.Now(), 15*time.Second,
		`document.getElementById('confirm-text').textContent.includes('topic=demo, partition=3')`)
	confirm(b, "End QoS override "+throttle, "ended")
	if l := list(); len(l.Overrides) != 1 || l.Overrides[0].Selector.Group != "other" || l.Overrides[0].LogLevel != "debug" {
		t.Fatalf("after End of %s: %+v, want only group=other's override, untouched", throttle, l.Overrides)
	}
	b.waitFor("the ended override gone from the page, the other listed", time.Now(), 15*time.Second,
		`document.querySelector(`+js(row)+`) === null && document.querySelector('#qos tbody').textContent.includes('group=other')`)
	b.noProblems("qos end")
}

// TestConsoleOverridesPageBounded: the Overrides page listed every QoS
// override — up to qos_overrides (10,000), a 5 MB page re-read every 5
// s. It lists the first 500 and says how many there are and where to
// read them all.
func TestConsoleOverridesPageBounded(t *testing.T) {
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: 1})
	for i := range 510 {
		if status, raw := cluster.Admin(t, "PUT", "/v1/admin/qos", map[string]any{"selector": map[string]any{"holder": fmt.Sprintf("job-%03d", i)}, "log_level": "debug", "ttl_ms": 600000}, nil); status != 200 {
			t.Fatalf("qos %d: %d %s", i, status, raw)
		}
	}
	b := loggedIn(t, cluster)
	b.run("overrides page", 20*time.Second, chromedp.Navigate(cluster.CoordinatorURL+"/console/overrides"))
	b.waitFor("500 rows of 510 overrides", time.Now(), 20*time.Second,
		`document.querySelectorAll('#qos tr[data-override]').length === 500 && `+
			`document.getElementById('overrides-more')?.textContent === 'The first 500 of 510 overrides, by id; every one: capgate admin qos list.'`)
	b.noProblems("overrides")
}
