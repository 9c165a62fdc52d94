package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/internal/stack"
)

// member is one consumer of a rebalance run with its poll loop.
type member interface {
	// stop ends the poll loop and leaves the group (commit, release).
	stop() error
}

// slowness makes a member process every poll for a seeded random time
// in [Min, Max]; the zero value is a fast member.
type slowness struct {
	Min, Max time.Duration
	Seed     uint64
}

// processor sleeps for each poll's processing time; nil for a fast member.
type processor struct {
	mu  sync.Mutex
	rng *rand.Rand
	s   slowness
}

func newProcessor(s slowness) *processor {
	if s.Max <= 0 {
		return nil
	}
	return &processor{rng: rand.New(rand.NewPCG(s.Seed, 0x5eed)), s: s}
}

// process simulates the work on one poll's records (a slow member's
// processing is the point of the scenario, so it is a real sleep).
func (p *processor) process() {
	if p == nil {
		return
	}
	p.mu.Lock()
	d := p.s.Min + time.Duration(p.rng.Int64N(int64(p.s.Max-p.s.Min)+1))
	p.mu.Unlock()
	time.Sleep(d)
}

// memberSpec is what every member of a run needs.
type memberSpec struct {
	Name    string
	Group   string
	Topic   string
	Tracker *tracker
	Slow    slowness
}

// startCapgateMember runs the stack's consumer (client.Consumer through
// the gateways) with its poll loop. It never commits in the loop: the SDK
// commits what was processed when a partition is revoked (and on Close),
// and a commit in the loop would put the coordinator's durable write into
// the steady state's gaps.
func startCapgateMember(d *deployment, spec memberSpec, credential string) (member, error) {
	cfg := d.ClientConfig(spec.Group, []string{spec.Topic}, credential)
	cfg.ClientID = spec.Name
	tr, name, proc := spec.Tracker, spec.Name, newProcessor(spec.Slow)
	c, err := stack.StartConsumer(context.Background(), stack.ConsumerOptions{
		Config: cfg, Logger: d.log.Named(name),
		OnRecords: func(_ string, records []client.Record, at time.Time) {
			for _, r := range records {
				tr.observe(name, r.Partition, r.Offset, r.Key, at)
			}
		},
		Process: func([]client.Record) { proc.process() },
		OnHook: func(h stack.Hook, ps []client.Partition, at time.Time) {
			tr.Hold(name, partitionNumbers(ps), h == stack.HookGrant, at)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return capgateMember{c}, nil
}

type capgateMember struct{ *stack.Consumer }

func (m capgateMember) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return m.Close(ctx)
}

func partitionNumbers(ps []client.Partition) []int32 {
	out := make([]int32, len(ps))
	for i, p := range ps {
		out[i] = p.Partition
	}
	return out
}

// kafkaProtocol is how a franz-go group member joins: the balancer, the
// KIP-848 switch, and the client-side heartbeat interval (0: kgo's 3s).
type kafkaProtocol struct {
	Balancer   func() kgo.GroupBalancer
	ServerSide bool
	Heartbeat  time.Duration
}

// kafkaMember is a franz-go group consumer reading Kafka directly. It
// blocks rebalances while a poll is being processed and commits what it
// processed when partitions are revoked, so nothing is consumed twice.
type kafkaMember struct {
	client *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startKafkaMember(s *deployment, spec memberSpec, proto kafkaProtocol) (*kafkaMember, error) {
	tr, name, topic := spec.Tracker, spec.Name, spec.Topic
	opts := []kgo.Opt{
		kgo.SeedBrokers(s.Kafka.Addrs()...),
		kgo.ClientID(name),
		kgo.ConsumerGroup(spec.Group),
		kgo.ConsumeTopics(topic),
		kgo.Balancers(proto.Balancer()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			tr.Hold(name, m[topic], true, time.Now())
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			tr.Hold(name, m[topic], false, time.Now())
			_ = cl.CommitUncommittedOffsets(ctx) // the commit on revoke
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			tr.Hold(name, m[topic], false, time.Now())
		}),
	}
	if proto.ServerSide {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	if proto.Heartbeat > 0 {
		opts = append(opts, kgo.HeartbeatInterval(proto.Heartbeat))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &kafkaMember{client: cl, cancel: cancel, done: make(chan struct{})}
	go m.loop(ctx, spec, newProcessor(spec.Slow))
	return m, nil
}

// loop polls, records and processes with rebalances blocked, then allows
// them; like the capgate member it commits only when partitions are
// revoked (OnPartitionsRevoked) and when it leaves.
func (m *kafkaMember) loop(ctx context.Context, spec memberSpec, proc *processor) {
	defer close(m.done)
	for {
		fetches := m.client.PollRecords(ctx, 10000)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			m.client.AllowRebalance()
			return
		}
		now := time.Now()
		fetches.EachRecord(func(r *kgo.Record) {
			spec.Tracker.observe(spec.Name, r.Partition, r.Offset, r.Key, now)
		})
		proc.process()
		m.client.AllowRebalance()
	}
}

func (m *kafkaMember) stop() error {
	m.cancel()
	<-m.done
	m.client.Close() // leaves the group; the revoke hook commits
	return nil
}
