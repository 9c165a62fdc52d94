package console

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/coordinator/leader"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestConsoleAtAStandbyWithoutALeader: while no replica leads (the
// replicas starting, or a takeover under way) a standby cannot send a
// browser to the leader's console, and it showed the JSON 421 body.
// Here every write to the state log is held: the leader cannot renew its
// lease and steps down, and every takeover waits on its barrier — no
// replica leads and none names one. The browser at a replica's console
// gets a page (the console's style, no script error or CSP violation)
// saying no replica leads and that it asks again; once the writes go
// through and a replica takes over, the page opens the leader's console
// by itself.
func TestConsoleAtAStandbyWithoutALeader(t *testing.T) {
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: 2, Coordinators: 2})
	ctx := context.Background()
	if _, err := cluster.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var releaseOnce sync.Once
	held := func() bool {
		select {
		case <-release:
			return false
		default:
			return true
		}
	}
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	kc := cluster.Kafka.Cluster()
	kc.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if req := kreq.(*kmsg.ProduceRequest); req.TransactionID != nil && held() { // the state log's writes
			kc.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	sdk.Eventually(t, 30*time.Second, "no replica leads or names a leader", func() (bool, string) {
		for _, co := range cluster.Coordinators() {
			role, hint, err := co.Role(ctx)
			if err != nil || role == leader.Leader || hint != "" {
				return false, fmt.Sprintf("%s: %s naming %q (%v)", co.Name, role, hint, err)
			}
		}
		return true, ""
	})

	at := cluster.Coordinators()[1].URL
	b := newBrowser(t)
	b.run("a console page at a replica", 20*time.Second, chromedp.Navigate(at+"/console/groups"))
	page := `(document.getElementById('standby')?.textContent ?? '')`
	b.waitFor("the page says no replica leads, and that it asks again", time.Now(), 15*time.Second,
		page+`.includes('no replica leads right now') && `+page+`.includes('asks again every 2 seconds') && `+
			`getComputedStyle(document.querySelector('.panel')).borderRadius !== '0px'`) // console.css applies
	b.noProblems("the standby page")

	releaseOnce.Do(func() { close(release) })
	lead, err := cluster.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.waitFor("the page opens the leader's console by itself", time.Now(), 30*time.Second,
		`location.origin === `+js(lead.URL)+` && location.pathname === '/console/login' && document.getElementById('token') !== null`)
	b.noProblems("at the leader")
}
