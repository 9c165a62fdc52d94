package ha

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/gateway"
)

// TestLeaderPausedKafkaMembersKeepSessions is
// TestLeaderPausedMembersKeepSessions for a real Kafka client: a kgo
// consumer (KIP-848, and classic cooperative-sticky) reads through a
// gateway's Kafka listener, whose member runs the SDK's driver against
// three coordinator replicas, while the leading replica is paused
// (SIGSTOP). The member's heartbeat held by the paused replica must be
// given up in time to reach the standby that took over before the
// session it gave the member (session_timeout from the takeover: the
// shipped 10 s, heartbeat_wait the shipped 3 s) runs out: the group
// keeps its capgate member (same id, same
// partitions, none fenced), the client is never revoked, loses nothing
// and reads no record twice. The client's longest time without a record
// across the fault is logged.
//
// Before, the listener's driver did not know it had replicas: a held
// heartbeat waited heartbeat_wait + request_timeout (13 s) at the
// frozen replica, the new leader expired the member, fenced its
// partitions, and the gateway rejoined it as a new one.
func TestLeaderPausedKafkaMembersKeepSessions(t *testing.T) {
	t.Parallel()
	for _, p := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"kip848", []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer())}},
		{"cooperative-sticky", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer()),
			kgo.HeartbeatInterval(500 * time.Millisecond), kgo.SessionTimeout(20 * time.Second)}},
	} {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			kafkaMemberThroughPause(t, "ha-paused-kafka-"+p.name, p.opts)
		})
	}
}

func kafkaMemberThroughPause(t *testing.T, group string, protocol []kgo.Opt) {
	c := harness.Start(t, harness.Options{
		Partitions: 6, Brokers: 3, Gateways: 1, Coordinators: 3, Groups: []string{group},
		CoordinatorProcess: true, Binaries: binaries, Timing: haTiming(),
		CoordinatorConfig: func(i int, cfg *coordinator.Config) {
			cfg.Broker.ClientID = clientID(i)
			// As TestZombieLeader: a write in flight at SIGSTOP gets its
			// outcome from the broker (fenced), not its own timeout.
			cfg.KafkaState.Timeout = 5 * time.Minute
			// The shipped defaults: the member names no session timeout
			// (a Kafka client's is the gateway's) and gets the group's.
			cfg.Groups.HeartbeatWait, cfg.Groups.SessionTimeout = 3*time.Second, 10*time.Second
		},
		GatewayConfig: func(_ int, cfg *gateway.Config) { cfg.KafkaListen = "127.0.0.1:0" },
	})
	prod := c.StartProducer(t, produceEvery)
	kc := startKafkaConsumer(t, c, group, protocol)
	before := c.WaitSettled(t, group, 1)
	kc.waitPolled(t, 100)

	old := leaderAmong(t, c)
	since := time.Now()
	old.Pause(t)
	next := leaderAmong(t, c, old)
	took := time.Since(since)
	// The member's heartbeat reaches the new leader: a contact it
	// recorded after it was found leading (a takeover restores each
	// member's contact at the takeover, before that).
	found := time.Now()
	var member string
	for m := range before {
		member = m
	}
	replaced := false
	harness.Eventually(t, harness.Wait, "the gateway's member heartbeats the new leader", func() (bool, string) {
		d, err := c.Describe(group)
		if err != nil {
			return false, err.Error()
		}
		if replaced = len(d.Members) != 1 || d.Members[0].ID != member; replaced {
			return true, "" // reported below
		}
		at, err := time.Parse(time.RFC3339Nano, d.Members[0].LastContact)
		return err == nil && at.After(found), fmt.Sprintf("last contact %s (%v)", d.Members[0].LastContact, err)
	})
	heard := "heard by it"
	if replaced {
		heard = "gone (replaced)"
	}
	t.Logf("%s paused, %s took over after %s, the gateway's member %s after %s", old.Name, next.Name,
		took.Round(time.Millisecond), heard, time.Since(since).Round(time.Millisecond))
	kc.waitPolled(t, 200)
	resumed := harness.Now()
	old.Resume(t)
	stepDown(t, c, old, resumed)
	kc.waitPolled(t, 100)
	end := time.Now()

	prod.Stop()
	want := map[int32]int64{} // partition → records produced
	for _, r := range c.Log.Snapshot().Produced {
		want[r.Partition] = max(want[r.Partition], r.Offset+1)
	}
	harness.Eventually(t, harness.Wait, "the consumer read every record produced", func() (bool, string) {
		return kc.readAll(want)
	})
	if after, why := c.Owners(group, 1); !sameOwners(before, after) {
		t.Errorf("the group's member or its partitions changed across the takeover: %v → %v %s (its session expired?)", before, after, why)
	}
	kc.check(t, since)
	t.Logf("the client's longest time without a record from the pause to after the resume: %s",
		kc.gap(since, end).Round(time.Millisecond))
}

// kafkaConsumer is a kgo group consumer reading through the gateway's
// Kafka listener: every record's partition and offset, when each poll
// returned, and every assignment change.
type kafkaConsumer struct {
	cl *kgo.Client

	mu      sync.Mutex
	read    map[int32]map[int64]int // partition → offset → times read
	polls   []time.Time             // each poll that returned records
	n       int
	changes []change // revoked or lost
	errs    []error
}

func startKafkaConsumer(t *testing.T, c *harness.Cluster, group string, protocol []kgo.Opt) *kafkaConsumer {
	t.Helper()
	cred := c.ClientCredential(t, group)
	return startKafkaConsumerWith(t, c, group, protocol, func() string { return cred })
}

// startKafkaConsumerWith is startKafkaConsumer authenticating (and
// re-authenticating, KIP-368) with what token returns at each call.
func startKafkaConsumerWith(t *testing.T, c *harness.Cluster, group string, protocol []kgo.Opt, token func() string) *kafkaConsumer {
	t.Helper()
	kc := &kafkaConsumer{read: map[int32]map[int64]int{}}
	told := func(what string) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			if len(m) == 0 {
				return // cooperative: kgo calls it with nothing too
			}
			kc.mu.Lock()
			defer kc.mu.Unlock()
			kc.changes = append(kc.changes, change{fmt.Sprintf("%s %v", what, m), time.Now()})
		}
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(c.Gateways()[0].InProcess().KafkaAddr()),
		kgo.SASL(oauth.Oauth(func(context.Context) (oauth.Auth, error) { return oauth.Auth{Token: token()}, nil })),
		kgo.ClientID("ha-kgo"), kgo.ConsumerGroup(group), kgo.ConsumeTopics(c.Topic()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.RetryTimeout(time.Minute),
		kgo.OnPartitionsRevoked(told("revoked")), kgo.OnPartitionsLost(told("lost")),
	}, protocol...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	kc.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			kc.mu.Lock()
			for _, r := range fs.Records() {
				if kc.read[r.Partition] == nil {
					kc.read[r.Partition] = map[int64]int{}
				}
				kc.read[r.Partition][r.Offset]++
				kc.n++
			}
			if len(fs.Records()) > 0 {
				kc.polls = append(kc.polls, now)
			}
			for _, e := range fs.Errors() {
				if ctx.Err() == nil {
					kc.errs = append(kc.errs, fmt.Errorf("%s/%d: %w", e.Topic, e.Partition, e.Err))
				}
			}
			kc.mu.Unlock()
		}
	}()
	t.Cleanup(func() { // before the stack's: registered after it
		cancel()
		<-done
		cl.Close()
	})
	return kc
}

// change is an assignment change the client was told of.
type change struct {
	what string
	at   time.Time
}

// waitPolled waits until the consumer read n more records than now.
func (kc *kafkaConsumer) waitPolled(t *testing.T, n int) {
	t.Helper()
	kc.mu.Lock()
	start := kc.n
	kc.mu.Unlock()
	harness.Eventually(t, harness.Wait, fmt.Sprintf("the kgo consumer reads %d more records", n), func() (bool, string) {
		kc.mu.Lock()
		defer kc.mu.Unlock()
		return kc.n-start >= n, fmt.Sprintf("%d so far", kc.n-start)
	})
}

// readAll reports whether every offset below want[p] of each partition
// was read.
func (kc *kafkaConsumer) readAll(want map[int32]int64) (bool, string) {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	for p, end := range want {
		for o := range end {
			if kc.read[p][o] == 0 {
				return false, fmt.Sprintf("partition %d offset %d (of %d) not read", p, o, end)
			}
		}
	}
	return true, ""
}

// check fails t for a record read twice, an assignment change since the
// fault, or a fetch error.
func (kc *kafkaConsumer) check(t *testing.T, since time.Time) {
	t.Helper()
	kc.mu.Lock()
	defer kc.mu.Unlock()
	twice := 0
	for p, offsets := range kc.read {
		for o, n := range offsets {
			if n > 1 {
				if twice++; twice <= 5 {
					t.Errorf("partition %d offset %d read %d times", p, o, n)
				}
			}
		}
	}
	if twice > 0 {
		t.Errorf("%d records read more than once (of %d read)", twice, kc.n)
	} else {
		t.Logf("%d records read, none twice", kc.n)
	}
	for _, c := range kc.changes {
		if !c.at.Before(since) {
			t.Errorf("the client's partitions were %s %s after the fault", c.what, c.at.Sub(since).Round(time.Millisecond))
		}
	}
	for _, e := range kc.errs[:min(len(kc.errs), 5)] {
		t.Errorf("fetch error: %v", e)
	}
}

// gap is the longest time within [from, to] without a poll that
// returned records (the edges included).
func (kc *kafkaConsumer) gap(from, to time.Time) time.Duration {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	polls := slices.Clone(kc.polls)
	last, gap := from, time.Duration(0)
	for _, at := range polls {
		if at.Before(from) || at.After(to) {
			continue
		}
		gap = max(gap, at.Sub(last))
		last = at
	}
	return max(gap, to.Sub(last))
}
