package sdk

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/internal/stack"
)

// Delivery is one record a member's Poll returned.
type Delivery struct {
	Member    string
	Partition int32
	Offset    int64
	Epoch     uint64
	Value     string
	At        time.Time // when Poll returned it
}

// HookKind names a consumer hook.
type HookKind string

// The hooks a member records.
const (
	HookGrant  HookKind = "grant"
	HookRevoke HookKind = "revoke"
	HookLost   HookKind = "lost"
)

// HookEvent is one call of a consumer hook.
type HookEvent struct {
	Kind       HookKind
	At         time.Time
	Partitions []int32
}

// MemberOptions configure NewMember.
type MemberOptions struct {
	// Name labels the member in deliveries and failures.
	Name  string
	Group string
	// SessionTimeout of the member (default 10s); the client's heartbeat
	// wait is the cluster's, capped below it.
	SessionTimeout time.Duration
	// CommitInterval: the poll loop commits at most this often (0: never;
	// revoked partitions are still committed by their release).
	CommitInterval time.Duration
	// Raw fetches raw record batches instead of JSON.
	Raw bool
	// Gateways overrides the cluster's gateway URLs.
	Gateways []string
	// Configure, if set, edits the client configuration last.
	Configure func(*client.Config)
	// Options are more client options (a credential source).
	Options []client.Option
}

// Member is one consumer of a group run by the test: it joins, runs the
// stack's poll loop (stack.Consumer) and records every delivery, hook
// call and confirmed commit, with timestamps. Its HTTP goes through a
// Transport that records fetches and can be killed. Methods are safe for
// concurrent use.
type Member struct {
	Name string
	*stack.Consumer
	Transport *Transport
	// JoinStarted and Joined bracket the Join call.
	JoinStarted, Joined time.Time

	mu         sync.Mutex
	deliveries []Delivery
	hooks      []HookEvent
	acked      map[int32]int64 // offsets a successful Commit confirmed
	last       map[int32]int64 // offset after the last delivered record
	killed     bool
}

// ClientConfig is the client configuration NewMember starts from.
func (c *Cluster) ClientConfig(opts MemberOptions, credential string) client.Config {
	cfg := c.Stack.ClientConfig(opts.Group, []string{c.Topic}, credential)
	if len(opts.Gateways) > 0 {
		cfg.Gateways = opts.Gateways
	}
	cfg.ClientID = "e2e"
	if opts.SessionTimeout > 0 {
		cfg.SessionTimeout = opts.SessionTimeout
		cfg.HeartbeatWait = min(c.Timing().HeartbeatWait, cfg.SessionTimeout/2)
	}
	cfg.Raw = opts.Raw
	if opts.Configure != nil {
		opts.Configure(&cfg)
	}
	return cfg
}

// NewMember builds a consumer, joins the group and starts polling. The
// member is closed (gracefully, bounded) at cleanup unless it was closed
// or killed before.
func (c *Cluster) NewMember(t testing.TB, opts MemberOptions) *Member {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "member"
	}
	m := &Member{Name: opts.Name, Transport: NewTransport(), acked: map[int32]int64{}, last: map[int32]int64{}}
	m.JoinStarted = time.Now()
	consumer, err := stack.StartConsumer(context.Background(), stack.ConsumerOptions{
		Config: c.ClientConfig(opts, c.ClientCredential(t, opts.Group)), Logger: c.log.Named(opts.Name),
		HTTP: &http.Client{Transport: m.Transport}, CommitEvery: opts.CommitInterval, Commit: m.commit,
		OnRecords: func(_ string, records []client.Record, at time.Time) { m.record(records, at) },
		OnHook:    func(h stack.Hook, ps []client.Partition, at time.Time) { m.hook(HookKind(h), ps, at) },
		Options:   opts.Options,
	})
	if err != nil {
		t.Fatalf("%s: %v", opts.Name, err)
	}
	m.Joined = time.Now()
	m.Consumer = consumer
	t.Cleanup(func() { m.Close(t) })
	return m
}

func (m *Member) hook(kind HookKind, ps []client.Partition, at time.Time) {
	e := HookEvent{Kind: kind, At: at}
	for _, p := range ps {
		e.Partitions = append(e.Partitions, p.Partition)
	}
	m.mu.Lock()
	m.hooks = append(m.hooks, e)
	m.mu.Unlock()
}

func (m *Member) record(records []client.Record, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range records {
		m.deliveries = append(m.deliveries, Delivery{
			Member: m.Name, Partition: r.Partition, Offset: r.Offset, Epoch: r.Epoch, Value: string(r.Value), At: at,
		})
		m.last[r.Partition] = max(m.last[r.Partition], r.Offset+1)
	}
}

// commit commits everything delivered so far; on success the offsets of
// the partitions held before and after are confirmed.
func (m *Member) commit(ctx context.Context, consumer *client.Consumer) error {
	before := heldSet(consumer.Assigned())
	m.mu.Lock()
	snapshot := make(map[int32]int64, len(m.last))
	for p, o := range m.last {
		snapshot[p] = o
	}
	m.mu.Unlock()
	if err := consumer.Commit(ctx); err != nil {
		return err
	}
	after := heldSet(consumer.Assigned())
	m.mu.Lock()
	defer m.mu.Unlock()
	for p, o := range snapshot {
		if before[p] && after[p] {
			m.acked[p] = max(m.acked[p], o)
		}
	}
	return nil
}

func heldSet(ps []client.Partition) map[int32]bool {
	out := make(map[int32]bool, len(ps))
	for _, p := range ps {
		out[p.Partition] = true
	}
	return out
}

// Deliveries returns a copy of the deliveries so far, in delivery order.
func (m *Member) Deliveries() []Delivery {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.deliveries)
}

// Hooks returns a copy of the hook calls so far, in order.
func (m *Member) Hooks() []HookEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.hooks)
}

// Acked returns the offsets that successful commits confirmed.
func (m *Member) Acked() map[int32]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[int32]int64, len(m.acked))
	for p, o := range m.acked {
		out[p] = o
	}
	return out
}

// Assigned lists the partition numbers the consumer is fetching.
func (m *Member) Assigned() []int32 {
	var out []int32
	for _, p := range m.Consumer.Assigned() {
		out = append(out, p.Partition)
	}
	return out
}

// PollErr is the error that ended the poll loop, if it ended.
func (m *Member) PollErr() error { return m.Err() }

// Kill stops the member without leaving: every request in flight is cut,
// every later one fails, and the poll loop stops. The coordinator only
// learns of it by the member's silence.
func (m *Member) Kill() {
	m.Transport.Kill()
	m.StopPolling()
	m.mu.Lock()
	m.killed = true
	m.mu.Unlock()
}

// Close closes the consumer gracefully (revoke, final commit, leave)
// within 10 s and waits for the poll loop; a killed member is only
// stopped.
func (m *Member) Close(t testing.TB) { m.CloseWithin(t, 10*time.Second) }

// CloseWithin is Close given timeout to close in: a member holding
// thousands of partitions closes (their release commits) for longer on a
// loaded machine.
func (m *Member) CloseWithin(t testing.TB, timeout time.Duration) {
	m.mu.Lock()
	killed := m.killed
	m.mu.Unlock()
	if killed {
		timeout = 100 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var err error
	slow(t, m.Name+" close", func() { err = m.Consumer.Close(ctx) })
	m.Transport.CloseIdleConnections()
	if err != nil && !killed {
		t.Errorf("%s: close: %v", m.Name, err)
	}
}
