package kafkaclients

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestSubscriptionChange: a kgo member that adds a topic to its
// subscription (AddConsumeTopics: a KIP-848 member's next heartbeat
// carries the new SubscribedTopicNames, a classic member rejoins with new
// subscription metadata) gets the new topic's partitions assigned and
// consumes them, and goes on consuming its first topic — the listener
// ignored the subscription of every heartbeat and rejoin after the join,
// so the new topic was never assigned. Dropping the topic again
// (PurgeTopicsFromConsuming) gives its partitions up.
func TestSubscriptionChange(t *testing.T) {
	for _, proto := range []protocol{kip848, cooperativeSticky} {
		t.Run(proto.String(), func(t *testing.T) { testSubscriptionChange(t, proto) })
	}
}

func testSubscriptionChange(t *testing.T, proto protocol) {
	s := Start(t, Options{Partitions: 2})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	direct, err := kgo.NewClient(kgo.SeedBrokers(s.Kafka.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if _, err := kadm.NewClient(direct).CreateTopic(ctx, 2, 1, nil, "extra"); err != nil {
		t.Fatal(err)
	}
	cred, err := s.Stack.ClientCredential(ctx, "sub", []string{"sub"}, []string{"orders", "extra"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	m := joinGroup(t, s, "solo", "sub", cred, proto)
	byTopic := m.byTopic
	produceDirect(t, s, "orders", 0, 2)
	sdk.Eventually(t, 20*time.Second, "the member consuming orders", func() (bool, string) {
		return byTopic()["orders"] == 2, fmt.Sprint(byTopic())
	})

	m.cl.AddConsumeTopics("extra")
	produceDirect(t, s, "extra", 0, 3)
	produceDirect(t, s, "extra", 1, 3)
	produceDirect(t, s, "orders", 1, 2)
	sdk.Eventually(t, 20*time.Second, "the added topic's records polled, and orders' still", func() (bool, string) {
		n := byTopic()
		return n["extra"] == 6 && n["orders"] == 4, fmt.Sprint(n)
	})
	if errs := m.Errors(); len(errs) > 0 {
		t.Errorf("fetch errors: %v", errs)
	}

	m.cl.PurgeTopicsFromConsuming("extra")
	sdk.Eventually(t, 20*time.Second, "extra's partitions released in capgate", func() (bool, string) {
		var g struct {
			Partitions []struct {
				Topic string `json:"topic"`
				Owner string `json:"owner"`
			} `json:"partitions"`
		}
		if status, raw := s.Admin(t, "GET", "/v1/admin/groups/sub", nil, &g); status != 200 {
			return false, fmt.Sprintf("describe: %d %s", status, raw)
		}
		var owned []string
		for _, p := range g.Partitions {
			if p.Topic == "extra" && p.Owner != "" {
				owned = append(owned, p.Topic)
			}
		}
		return len(owned) == 0, fmt.Sprintf("extra partitions still owned: %d", len(owned))
	})
}
