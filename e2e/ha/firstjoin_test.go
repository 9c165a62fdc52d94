package ha

import (
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
)

// TestFirstJoinOutlastsATakeover: a consumer's first join starts just
// after the leading replica was killed -9 (or paused), with a
// request_timeout of 500 ms — shorter than any takeover (a standby
// stands only after a lease of 1 s without a commit). The SDK retries
// the join through the outage (connection refused, or attempts that
// never answer, and standbys' 421 with no leader known) until
// join_timeout (30 s, the default), every attempt with the first one's
// Idempotency-Key, and the member joins the replica that took over:
// the group has that one member, holding every partition, reading, and
// every checker holds. Before, the first join ended at request_timeout
// and the consumer stopped ("request_timeout passed without an answer",
// or the last 421): lost2's run of TestLeaderFailsDuringALargeHandoff
// under load, where the group then held a member nobody ran.
func TestFirstJoinOutlastsATakeover(t *testing.T) {
	t.Parallel()
	killOrPause(t, func(t *testing.T, name string, pause bool) {
		group := "ha-first-join-takeover-" + name
		c := startHA(t, group, nil)
		prod := c.StartProducer(t, produceEvery)
		lead := leaderAmong(t, c)
		cred := c.ClientCredential(t, group) // minted before the failure: the admin client does not wait out an election
		at := harness.Now()
		failReplica(t, lead, pause)
		m := c.LaunchMembers(t, harness.MemberOptions{Name: "a", Group: group, Credential: cred, RequestTimeout: 500 * time.Millisecond, FirstReplica: lead})[0]
		if err := m.AwaitJoin(harness.Wait); err != nil {
			t.Fatalf("the first join did not outlast the takeover: %v", err)
		}
		next := leaderAmong(t, c, lead)
		t.Logf("%s failed; a joined %s after, through %s", lead.Name, harness.Since(at).Round(time.Millisecond), next.Name)
		var d coordinator.GroupDescription
		harness.Eventually(t, harness.Wait, "the group described", func() (bool, string) {
			var err error
			d, err = c.Describe(group)
			return err == nil, fmt.Sprint(err)
		})
		if len(d.Members) != 1 || d.Members[0].ID != m.MemberID() {
			var ids []string
			for _, dm := range d.Members {
				ids = append(ids, dm.ID)
			}
			t.Fatalf("members %v after the join, want only a's %s: an attempt left a member behind", ids, m.MemberID())
		}
		c.WaitSettled(t, group, 1)
		c.WaitFlowing(t, group, 100)
		bringBack(t, c, lead, pause)
		c.WaitFlowing(t, group, 100)
		s := c.Finish(t, prod, group)
		log503(t, s, at)
	})
}
