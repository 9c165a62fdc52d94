package kafkaclients

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/gateway"
)

// TestOneTenantCannotFillTheListenersMembers is redteam19 #4: the Kafka
// listener runs at most kafka_max_members group members (10,000), all
// tenants together, and a join beyond is GROUP_MAX_SIZE_REACHED, which
// clients take as final. One credential may have as many live members as
// the coordinator's members_per_credential (10,000, the same number), so
// one tenant's members — KIP-848 heartbeats of new member ids, any number
// per connection — filled a gateway, and every other tenant's consumer
// through it stopped for good. Now each tenant (Principal.tenant) runs at
// most kafka_max_members_per_tenant there. Here the gateway runs 4, a
// tenant 2: tenant A's third and fourth members are refused, and tenant
// B's member is assigned its partitions. Fails without the tenant's bound
// (A's four members run; B's is GROUP_MAX_SIZE_REACHED).
func TestOneTenantCannotFillTheListenersMembers(t *testing.T) {
	s := Start(t, Options{Partitions: 2, Gateway: func(c *gateway.Config) {
		c.KafkaMaxMembers, c.KafkaMaxMembersPerTenant = 4, 2
	}})
	credA := tenantCredential(t, s, "tenant-a", []string{"a-*"})
	credB := tenantCredential(t, s, "tenant-b", []string{"b-*"})
	var refusedA int
	var first *kgo.Client
	for i := range 4 {
		cl, err := joined(t, s, credA, fmt.Sprintf("a-%d", i))
		switch {
		case err != nil:
			refusedA++
		case first == nil:
			first = cl
		}
	}
	if _, err := joined(t, s, credB, "b-0"); err != nil {
		t.Fatalf("tenant B's member after tenant A's four joins (%d refused): %v", refusedA, err)
	}
	if refusedA != 2 {
		t.Errorf("tenant A: %d of 4 members refused, want 2 (kafka_max_members_per_tenant 2)", refusedA)
	}
	// A member that leaves gives its tenant's place back.
	first.Close()
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		_, err := joined(t, s, credA, fmt.Sprintf("a-again-%d", i))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tenant A's member after one of its two left: %v", err)
		}
	}
}

// joined starts a KIP-848 kgo member of group with credential and waits
// until it is assigned a partition (nil error; it runs on until the test
// ends or its client is closed) or refused GROUP_MAX_SIZE_REACHED (that
// error).
func joined(t *testing.T, s *Stack, credential, group string) (*kgo.Client, error) {
	t.Helper()
	assigned := make(chan struct{}, 1)
	opts := append([]kgo.Opt{kgo.ClientID(group), kgo.ConsumerGroup(group), kgo.ConsumeTopics(s.Topic),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			select {
			case assigned <- struct{}{}:
			default:
			}
		})}, kip848.opts()...)
	cl := kgoClient(t, s.KafkaAddrs(), credential, false, opts...)
	refused := pollUntilClosed(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case <-assigned:
		return cl, nil
	case err := <-refused:
		return cl, err
	case <-ctx.Done():
		t.Fatalf("member of %s: neither assigned nor refused in 30 s", group)
		return nil, nil
	}
}

// pollUntilClosed polls cl (and so it heartbeats, joins and retries)
// until it is closed; the first GROUP_MAX_SIZE_REACHED it returns is sent
// on the channel.
func pollUntilClosed(cl *kgo.Client) <-chan error {
	refused := make(chan error, 1)
	go func() {
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachError(func(_ string, _ int32, err error) {
				if errors.Is(err, kerr.GroupMaxSizeReached) {
					select {
					case refused <- err:
					default:
					}
				}
			})
		}
	}()
	return refused
}

// TestFewTenantsCannotFillTheListenersMembers is what redteam19 #4 left:
// kafka_max_members_per_tenant stops one tenant, but a few at their
// bound filled kafka_max_members (4 × 2,500 = 10,000 at the defaults)
// and every other tenant's consumer was refused GROUP_MAX_SIZE_REACHED,
// final to Kafka clients. Here a gateway of 4 members, 2 a tenant:
// tenants A and B hold 2 each; C's member and then D's each take the
// place of the newest member of a tenant holding 2 — closed through the
// coordinator (released, left: the gateway's members come back to 4) —
// and E, with every tenant at its share (1 of 4), is refused. Fails
// without the fair share (C refused GROUP_MAX_SIZE_REACHED).
func TestFewTenantsCannotFillTheListenersMembers(t *testing.T) {
	s := Start(t, Options{Partitions: 2, Gateway: func(c *gateway.Config) {
		c.KafkaMaxMembers, c.KafkaMaxMembersPerTenant = 4, 2
	}})
	creds := map[string]string{}
	for _, tenant := range []string{"a", "b", "c", "d", "e"} {
		creds[tenant] = tenantCredential(t, s, "tenant-"+tenant, []string{tenant + "-*"})
	}
	for _, group := range []string{"a-0", "a-1", "b-0", "b-1"} {
		if _, err := joined(t, s, creds[group[:1]], group); err != nil {
			t.Fatalf("%s's member with room: %v", group, err)
		}
	}
	for i, tenant := range []string{"c", "d"} {
		if _, err := joined(t, s, creds[tenant], tenant+"-0"); err != nil {
			t.Fatalf("tenant %s's first member while tenants hold 2 of 4 places each: %v", strings.ToUpper(tenant), err)
		}
		want := fmt.Sprintf("capgate_gateway_kafka_members_evicted_total %d\n", i+1)
		sdk.Eventually(t, 30*time.Second, "one member closed for tenant "+tenant+"'s, and gone", func() (bool, string) {
			m := metrics(t, s)
			return strings.Contains(m, want) && strings.Contains(m, "capgate_gateway_kafka_members 4\n"),
				grep(m, "capgate_gateway_kafka_members")
		})
	}
	if _, err := joined(t, s, creds["e"], "e-0"); !errors.Is(err, kerr.GroupMaxSizeReached) {
		t.Fatalf("tenant E's member with every tenant at its share (1 of 4): %v, want GROUP_MAX_SIZE_REACHED", err)
	}
	if m := metrics(t, s); !strings.Contains(m, "capgate_gateway_kafka_members_evicted_total 2\n") {
		t.Errorf("after E's refused join: %s, want 2 members evicted", grep(m, "capgate_gateway_kafka_members"))
	}
}

// TestTenantChurnCannotEvictAgainAndAgain is review25 #3, the attack with
// real KIP-848 kgo members: at a full gateway (3 places, 2 a tenant) a
// tenant under its share closes another tenant's newest member with its
// join — then leaves, the other tenant fills the place again, and it
// joins again. Before, each such join closed one more member of the
// other tenant (a release and a rebalance of its group each time),
// nothing bounding how often. Now a tenant takes at most one place by
// eviction a kafka_member_eviction_interval (here a minute): its second
// join is answered COORDINATOR_NOT_AVAILABLE, which kgo retries (never
// GROUP_MAX_SIZE_REACHED, final), and counted in
// capgate_gateway_kafka_member_evictions_paced_total; the other tenant
// keeps its members. Fails without groups.paceLocked (a second member
// evicted, none paced).
func TestTenantChurnCannotEvictAgainAndAgain(t *testing.T) {
	s := Start(t, Options{Partitions: 2, Gateway: func(c *gateway.Config) {
		c.KafkaMaxMembers, c.KafkaMaxMembersPerTenant = 3, 2
		c.KafkaMemberEvictionInterval = time.Minute
	}})
	creds := map[string]string{}
	for _, tenant := range []string{"a", "b", "c"} {
		creds[tenant] = tenantCredential(t, s, "tenant-"+tenant, []string{tenant + "-*"})
	}
	clients := map[string]*kgo.Client{}
	for _, group := range []string{"a-0", "a-1", "b-0"} {
		cl, err := joined(t, s, creds[group[:1]], group)
		if err != nil {
			t.Fatalf("%s's member with room: %v", group, err)
		}
		clients[group] = cl
	}
	churner, err := joined(t, s, creds["c"], "c-0")
	if err != nil {
		t.Fatalf("tenant C's first member, A holding 2 of 3 places: %v", err)
	}
	sdk.Eventually(t, 30*time.Second, "A's newest member closed for C's", func() (bool, string) {
		m := metrics(t, s)
		return strings.Contains(m, "capgate_gateway_kafka_members_evicted_total 1\n") && strings.Contains(m, "capgate_gateway_kafka_members 3\n"),
			grep(m, "capgate_gateway_kafka_member")
	})
	clients["a-1"].Close() // the evicted member's client gives up
	churner.Close()        // C leaves: a place is free
	sdk.Eventually(t, 30*time.Second, "C's member gone", func() (bool, string) {
		m := metrics(t, s)
		return strings.Contains(m, "capgate_gateway_kafka_members 2\n"), grep(m, "capgate_gateway_kafka_member")
	})
	if _, err := joined(t, s, creds["a"], "a-2"); err != nil {
		t.Fatalf("A fills the place C left: %v", err)
	}
	final := pollUntilClosed(kgoClient(t, s.KafkaAddrs(), creds["c"], false, append([]kgo.Opt{kgo.ClientID("c-1"), kgo.ConsumerGroup("c-1"),
		kgo.ConsumeTopics(s.Topic)}, kip848.opts()...)...))
	sdk.Eventually(t, 30*time.Second, "C's join again within the interval paced", func() (bool, string) {
		m := metrics(t, s)
		return grepCount(m, "capgate_gateway_kafka_member_evictions_paced_total") >= 1, grep(m, "capgate_gateway_kafka_member")
	})
	m := metrics(t, s)
	if !strings.Contains(m, "capgate_gateway_kafka_members_evicted_total 1\n") || !strings.Contains(m, "capgate_gateway_kafka_members 3\n") {
		t.Fatalf("C's join again within kafka_member_eviction_interval: %s, want no second eviction (1 evicted, A's and B's 3 members on)",
			grep(m, "capgate_gateway_kafka_member"))
	}
	select {
	case err := <-final:
		t.Fatalf("C's paced member was told %v, final to Kafka clients; want a retriable refusal", err)
	default:
	}
}
