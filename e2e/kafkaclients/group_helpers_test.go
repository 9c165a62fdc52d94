package kafkaclients

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// groupMember is a kgo group consumer through the listener, recording
// what it polled and what it was assigned.
type groupMember struct {
	name string
	cl   *kgo.Client
	stop context.CancelFunc
	done chan struct{}

	mu        sync.Mutex
	records   []*kgo.Record
	polledAt  []time.Time // when each record was polled
	assigned  map[int32]bool
	grantedAt map[int32]time.Time // last OnPartitionsAssigned naming it
	changedAt time.Time           // last assignment change
	revoked   []int32             // every partition OnPartitionsRevoked named
	lost      []int32
	errs      []error
}

// kip848 and cooperative select the group protocol.
type protocol int

const (
	kip848 protocol = iota
	cooperativeSticky
)

func (p protocol) String() string { return [...]string{"kip848", "cooperative-sticky"}[p] }

// opts are the kgo options of a member speaking p.
func (p protocol) opts() []kgo.Opt {
	if p == kip848 {
		return []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer())}
	}
	return []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.SessionTimeout(6 * time.Second)}
}

// joinGroup starts a kgo member of group through the gateways with its
// own client id (see ARCHITECTURE: the client key).
func joinGroup(t testing.TB, s *Stack, name, group, credential string, proto protocol, extra ...kgo.Opt) *groupMember {
	t.Helper()
	return startMember(t, s.Topic, name, group, proto, func(opts ...kgo.Opt) *kgo.Client {
		return kgoClient(t, s.KafkaAddrs(), credential, false, opts...)
	}, extra...)
}

// startMember starts a kgo group member built by newClient (through the
// listener, or straight to Kafka for the baselines).
func startMember(t testing.TB, topic, name, group string, proto protocol, newClient func(...kgo.Opt) *kgo.Client, extra ...kgo.Opt) *groupMember {
	t.Helper()
	m := &groupMember{name: name, assigned: map[int32]bool{}, grantedAt: map[int32]time.Time{}, done: make(chan struct{})}
	opts := []kgo.Opt{
		kgo.ClientID(name), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) { m.update(a, true) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
			m.update(r, false)
			m.mu.Lock()
			m.revoked = append(m.revoked, r[topic]...)
			m.mu.Unlock()
			_ = cl.CommitUncommittedOffsets(ctx)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			m.update(l, false)
			m.mu.Lock()
			m.lost = append(m.lost, l[topic]...)
			m.mu.Unlock()
		}),
	}
	opts = append(opts, proto.opts()...)
	m.cl = newClient(append(opts, extra...)...)
	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	go m.poll(ctx)
	t.Cleanup(func() { m.Close() })
	return m
}

func (m *groupMember) update(parts map[string][]int32, add bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.changedAt = time.Now()
	for _, ps := range parts {
		for _, p := range ps {
			if add {
				m.assigned[p] = true
				m.grantedAt[p] = time.Now()
			} else {
				delete(m.assigned, p)
			}
		}
	}
}

func (m *groupMember) poll(ctx context.Context) {
	defer close(m.done)
	for ctx.Err() == nil {
		fs := m.cl.PollFetches(ctx)
		m.mu.Lock()
		now := time.Now()
		for _, r := range fs.Records() {
			m.records = append(m.records, r)
			m.polledAt = append(m.polledAt, now)
		}
		for _, e := range fs.Errors() {
			if ctx.Err() == nil {
				m.errs = append(m.errs, fmt.Errorf("%s/%d: %w", e.Topic, e.Partition, e.Err))
			}
		}
		m.mu.Unlock()
	}
}

// Close leaves the group (committing) and stops polling.
func (m *groupMember) Close() {
	select {
	case <-m.done:
		return
	default:
	}
	m.stop()
	<-m.done
	m.cl.Close()
}

// Assigned lists the member's partitions, sorted.
func (m *groupMember) Assigned() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int32
	for p := range m.assigned {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Records returns a copy of what the member polled.
func (m *groupMember) Records() []*kgo.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*kgo.Record(nil), m.records...)
}

// byTopic counts the records the member polled per topic.
func (m *groupMember) byTopic() map[string]int {
	n := map[string]int{}
	for _, r := range m.Records() {
		n[r.Topic]++
	}
	return n
}

// seen is, per partition, the offsets polled by each member.
type ledger map[int32]map[int64][]string

func ledgerOf(members ...*groupMember) ledger {
	l := ledger{}
	for _, m := range members {
		for _, r := range m.Records() {
			if l[r.Partition] == nil {
				l[r.Partition] = map[int64][]string{}
			}
			l[r.Partition][r.Offset] = append(l[r.Partition][r.Offset], m.name)
		}
	}
	return l
}

// count is how many distinct records the ledger holds.
func (l ledger) count() int {
	n := 0
	for _, offs := range l {
		n += len(offs)
	}
	return n
}

// settled is s.Settled that also waits for the group to exist.
func settled(t testing.TB, s *Stack, group string, members int) (bool, string) {
	if status, raw := s.Admin(t, "GET", "/v1/admin/groups/"+group, nil, nil); status != 200 {
		return false, fmt.Sprintf("describe: %d %s", status, raw)
	}
	return s.Settled(t, group, members)
}

// Revoked lists the partitions the member was asked to give up, in order.
func (m *groupMember) Revoked() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int32(nil), m.revoked...)
}

// Errors lists the fetch errors kgo returned to the member.
func (m *groupMember) Errors() []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]error(nil), m.errs...)
}

// producer writes one record per partition every tick straight to Kafka
// until stopped; produced() is how many records each partition got.
type producer struct {
	stop context.CancelFunc
	done chan struct{}
	mu   sync.Mutex
	n    map[int32]int64
}

func startProducer(t testing.TB, s *Stack, tick time.Duration) *producer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Kafka.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &producer{stop: cancel, done: make(chan struct{}), n: map[int32]int64{}}
	go func() {
		defer close(p.done)
		defer cl.Close()
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for ctx.Err() == nil {
			for part := range s.Partitions {
				r := &kgo.Record{Topic: s.Topic, Partition: part, Value: []byte("x")}
				if err := cl.ProduceSync(ctx, r).FirstErr(); err == nil {
					p.mu.Lock()
					p.n[part]++
					p.mu.Unlock()
				}
			}
			select {
			case <-tk.C:
			case <-ctx.Done():
			}
		}
	}()
	t.Cleanup(p.Stop)
	return p
}

// Stop stops producing and returns the records written per partition.
func (p *producer) Stop() {
	p.stop()
	<-p.done
}

func (p *producer) produced() map[int32]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[int32]int64{}
	for k, v := range p.n {
		out[k] = v
	}
	return out
}

func (p *producer) total() int64 {
	var n int64
	for _, v := range p.produced() {
		n += v
	}
	return n
}

// clientsSettled reports whether the kgo members' own assignments (as
// their hooks saw them) cover every partition once, balanced.
func clientsSettled(partitions int32, members ...*groupMember) (bool, string) {
	owner := map[int32]string{}
	floor := int(partitions) / len(members)
	for _, m := range members {
		a := m.Assigned()
		if len(a) < floor || len(a) > floor+1 {
			return false, fmt.Sprintf("%s owns %v", m.name, a)
		}
		for _, p := range a {
			if o, dup := owner[p]; dup {
				return false, fmt.Sprintf("%d owned by %s and %s", p, o, m.name)
			}
			owner[p] = m.name
		}
	}
	return len(owner) == int(partitions), fmt.Sprintf("%d of %d partitions owned", len(owner), partitions)
}

// polledSince lists the records of partition polled after t, with the
// time the member was last granted it.
func (m *groupMember) polledSince(partition int32, t time.Time) (recs []*kgo.Record, at []time.Time, granted time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, r := range m.records {
		if r.Partition == partition && m.polledAt[i].After(t) {
			recs = append(recs, r)
			at = append(at, m.polledAt[i])
		}
	}
	return recs, at, m.grantedAt[partition]
}

// lastChange is when the member's assignment last changed.
func (m *groupMember) lastChange() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changedAt
}
