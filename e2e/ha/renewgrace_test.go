package ha

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/client/driver"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/gateway"
)

// TestKafkaMemberRenewedInGraceAcrossATakeover: a kgo consumer (KIP-848)
// reads through a gateway's Kafka listener with 30 s tokens of an OAuth
// client. Every coordinator replica is frozen (SIGSTOP) 3 s before its
// first token expires, so its re-authentication (kgo: ~1 s before) and
// the listener's carry-over of the member to the new token meet no
// coordinator; the standbys are let go 3 s after the expiry (the leeway
// is 1 s) and one takes over. The carry-over's rejoin lands after the
// member token it presents expired, inside groups.renew_token_grace
// (10 s here): the member is renewed in place — same capgate member,
// same partitions, the client never revoked, no record read twice.
// Before, the new leader refused the expired member token (401
// token_expired), the member ended with it, and the client had every
// partition revoked (README: tokens were to leave ≥ 6 s at renewal).
func TestKafkaMemberRenewedInGraceAcrossATakeover(t *testing.T) {
	t.Parallel()
	const name = "ha-grace-kafka"
	const ttl = 30 * time.Second
	c := harness.Start(t, harness.Options{
		Partitions: 6, Brokers: 3, Gateways: 1, Coordinators: 3, Groups: []string{name},
		CoordinatorProcess: true, Binaries: binaries, Timing: haTiming(),
		CoordinatorConfig: func(i int, cfg *coordinator.Config) {
			cfg.Broker.ClientID = clientID(i)
			cfg.KafkaState.Timeout = 5 * time.Minute // as TestZombieLeader: a write in flight at SIGSTOP is fenced by the broker
			cfg.Groups.HeartbeatWait, cfg.Groups.SessionTimeout = 3*time.Second, 10*time.Second
			cfg.Groups.RenewTokenGrace = group.RenewTokenGraceMax
		},
		GatewayConfig: func(_ int, cfg *gateway.Config) {
			cfg.KafkaListen = "127.0.0.1:0"
			// The carry-over is retried until request_timeout after its
			// first attempt: past the outage and the takeover.
			cfg.Broker.RequestTimeout = 20 * time.Second
		},
	})
	var created coordinator.OAuthClientCreated
	c.MustAdmin(t, http.MethodPost, "/v1/admin/oauth/clients", coordinator.OAuthClientRequest{
		Name: "ha-grace", Groups: []string{name}, Topics: []string{c.Topic()}, TokenTTLMs: ttl.Milliseconds()}, &created)
	mint := func() string {
		t.Helper()
		token, err := oauthToken(context.Background(), c, created.ClientID, created.ClientSecret)
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
	first := mint()
	exp, _ := driver.TokenExpiry(first)
	var renewed atomic.Pointer[string] // what kgo gets from the freeze on
	prod := c.StartProducer(t, produceEvery)
	kc := startKafkaConsumerWith(t, c, name, []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer())},
		func() string {
			if p := renewed.Load(); p != nil {
				return *p
			}
			return first
		})
	before := c.WaitSettled(t, name, 1)
	kc.waitPolled(t, 100)
	var member string
	for m := range before {
		member = m
	}
	freezeAt := exp.Add(-3 * time.Second)
	if time.Now().After(freezeAt.Add(-time.Second)) {
		t.Fatalf("the group settled %s before the first token's expiry: too late to freeze the replicas before kgo re-authenticates", time.Until(exp).Round(time.Millisecond))
	}
	// Waits on the clock, not for an event: tokens expire by the clock.
	time.Sleep(time.Until(freezeAt))
	second := mint()
	renewed.Store(&second)
	old := leaderAmong(t, c)
	since := time.Now()
	for _, co := range c.Replicas {
		co.Pause(t)
	}
	time.Sleep(time.Until(exp.Add(3 * time.Second))) // past the 1 s leeway: on main, refused
	for _, co := range c.Replicas {
		if co != old {
			co.Resume(t)
		}
	}
	next := leaderAmong(t, c, old)
	led := time.Now()
	t.Logf("replicas frozen at exp-3s; standbys resumed at exp+3s; %s leads at exp+%s", next.Name, led.Sub(exp).Round(time.Millisecond))
	harness.Eventually(t, harness.Wait, "the gateway's member heartbeats the new leader", func() (bool, string) {
		d, err := c.Describe(name)
		if err != nil {
			return false, err.Error()
		}
		if len(d.Members) != 1 || d.Members[0].ID != member {
			t.Fatalf("the group's members after the takeover: %+v, want the one member %s kept (renewed in the grace)", d.Members, member)
		}
		at, err := time.Parse(time.RFC3339Nano, d.Members[0].LastContact)
		return err == nil && at.After(led), fmt.Sprintf("last contact %s (%v)", d.Members[0].LastContact, err)
	})
	t.Logf("the member heard by %s at exp+%s", next.Name, time.Until(exp).Abs().Round(time.Millisecond))
	kc.waitPolled(t, 200)
	resumed := harness.Now()
	old.Resume(t)
	stepDown(t, c, old, resumed)
	kc.waitPolled(t, 100)

	prod.Stop()
	want := map[int32]int64{}
	for _, r := range c.Log.Snapshot().Produced {
		want[r.Partition] = max(want[r.Partition], r.Offset+1)
	}
	harness.Eventually(t, harness.Wait, "the consumer read every record produced", func() (bool, string) {
		return kc.readAll(want)
	})
	if after, why := c.Owners(name, 1); !sameOwners(before, after) {
		t.Errorf("the group's member or its partitions changed across the takeover: %v → %v %s", before, after, why)
	}
	kc.check(t, since)
}
