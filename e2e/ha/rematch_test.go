package ha

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
)

// TestLeaderFailsDuringARegexRematch: members a and b subscribe by
// pattern ("orders.*") and hold the 200 partitions of orders when a
// topic matching it, orders-more (100 partitions), is created; as soon
// as the first of its partitions is granted, the leading replica is
// killed -9 (or paused). The replica that takes over has the rematch in
// its log (or makes it from its own metadata): every partition of both
// topics ends owned by one member, the group reads on, nothing lost,
// every checker holds (fetches answered 503 counted, log503).
func TestLeaderFailsDuringARegexRematch(t *testing.T) {
	t.Parallel()
	killOrPause(t, func(t *testing.T, name string, pause bool) {
		group, partitions, added := "ha-rematch-"+name, int32(200), int32(100)
		c := startHAWith(t, group, partitions, nil, func(cfg *coordinator.Config) {
			cfg.MetadataInterval = 500 * time.Millisecond
		})
		cred, err := c.Stack.ClientCredential(context.Background(), "rematch", []string{group}, []string{"*"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		opts := harness.MemberOptions{TopicPattern: c.Topic() + ".*", Credential: cred}
		a, b := opts, opts
		a.Name, b.Name = "a", "b"
		prod, _ := startReading(t, c, group, 5*time.Second, a, b)

		lead := leaderAmong(t, c)
		since := harness.Now()
		more := c.Topic() + "-more"
		createTopic(t, c, more, added)
		harness.Eventually(t, harness.Wait, "a partition of "+more+" granted", func() (bool, string) {
			for _, g := range c.Log.Snapshot().Grants {
				if g.At >= since && g.Key.Topic == more {
					return true, ""
				}
			}
			return false, "none yet"
		})
		at := harness.Now()
		failReplica(t, lead, pause)
		c.DropSync()
		next := leaderAmong(t, c, lead)
		t.Logf("%s created; %s failed %s after, %s took over", more, lead.Name, time.Duration(at-since).Round(time.Millisecond), next.Name)
		harness.Eventually(t, harness.Wait, "every partition of both topics owned", func() (bool, string) {
			d, err := c.Describe(group)
			if err != nil {
				return false, err.Error()
			}
			owned := 0
			for _, p := range d.Partitions {
				if p.State == "owned" {
					owned++
				}
			}
			return owned == int(partitions+added), fmt.Sprintf("%d of %d owned", owned, partitions+added)
		})
		t.Logf("every partition of both topics owned %s after the fault", harness.Since(at).Round(time.Millisecond))
		c.WaitFlowing(t, group, int(partitions)/2)
		bringBack(t, c, lead, pause)
		s := c.Finish(t, prod, group)
		log503(t, s, at)
	})
}

// createTopic creates topic with n partitions in the cluster's Kafka.
func createTopic(t *testing.T, c *harness.Cluster, topic string, n int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BrokerConfig().Seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), harness.Wait)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, n, 3, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}
