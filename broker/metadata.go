package broker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// route is where a partition lives, as of the last metadata load.
type route struct {
	topicID [16]byte
	leader  int32
	epoch   int32 // leader epoch, sent as CurrentLeaderEpoch to fence stale leaders
	addr    string
}

type partitionMeta struct {
	leader int32
	epoch  int32
	code   int16 // partition error code in the metadata answer, 0 if fine
}

type topicMeta struct {
	id         [16]byte
	internal   bool
	partitions []partitionMeta // indexed by partition number
	loadedAt   time.Time
}

// flight is one metadata load that concurrent callers share.
type flight struct {
	done chan struct{}
	err  error
}

// metadataCache keeps partition leaders and partition counts per topic for
// MetadataMaxAge. Unknown topics are never cached, so a topic created a
// moment ago is seen on the next call. Loads for the same topic are shared
// and run under their own RequestTimeout, so one caller giving up does not
// fail the others. Readers take no lock: what a load learned replaces an
// immutable snapshot (every fetch reads it; loads are rare).
type metadataCache struct {
	kgo     *kgo.Client
	base    context.Context // ends at Close
	maxAge  time.Duration
	timeout time.Duration

	snap atomic.Pointer[metaSnapshot]

	mu      sync.Mutex // guards flights and the replacement of snap
	flights map[string]*flight
}

// metaSnapshot is the cache's content at one moment; never modified.
type metaSnapshot struct {
	topics  map[string]*topicMeta
	brokers map[int32]string // node id -> host:port
}

func newMetadataCache(base context.Context, cl *kgo.Client, cfg Config) *metadataCache {
	m := &metadataCache{
		kgo:     cl,
		base:    base,
		maxAge:  cfg.MetadataMaxAge,
		timeout: cfg.RequestTimeout,
		flights: make(map[string]*flight),
	}
	m.snap.Store(&metaSnapshot{topics: map[string]*topicMeta{}, brokers: map[int32]string{}})
	return m
}

// route returns the leader of topic/partition, loading metadata when the
// cache has nothing fresh, or always when force is set. The error is a kerr
// error, a transport error or a context error; callers wrap it.
func (m *metadataCache) route(ctx context.Context, topic string, partition int32, force bool) (route, error) {
	if !force {
		if r, err, ok := m.cached(topic, partition, m.maxAge); ok {
			return r, err
		}
	}
	if err := m.refresh(ctx, topic); err != nil {
		return route{}, err
	}
	r, err, ok := m.cached(topic, partition, anyAge)
	if !ok {
		return route{}, kerr.UnknownTopicOrPartition
	}
	return r, err
}

// anyAge accepts a cache entry however old: right after a load.
const anyAge = time.Duration(1<<63 - 1)

// cached answers from the cache; ok is false when the cache cannot answer
// (topic missing or older than maxAge, partition beyond the cached count).
func (m *metadataCache) cached(topic string, partition int32, maxAge time.Duration) (r route, err error, ok bool) {
	snap := m.snap.Load()
	tm := snap.topics[topic]
	if tm == nil || time.Since(tm.loadedAt) > maxAge || partition >= int32(len(tm.partitions)) {
		return route{}, nil, false
	}
	if partition < 0 {
		return route{}, kerr.UnknownTopicOrPartition, true
	}
	pm := tm.partitions[partition]
	if pm.code != 0 && pm.code != kerr.ReplicaNotAvailable.Code {
		return route{}, kerr.ErrorForCode(pm.code), true
	}
	if pm.leader < 0 {
		return route{}, kerr.LeaderNotAvailable, true
	}
	addr, found := snap.brokers[pm.leader]
	if !found {
		return route{}, kerr.BrokerNotAvailable, true
	}
	return route{topicID: tm.id, leader: pm.leader, epoch: pm.epoch, addr: addr}, nil, true
}

// partitionCount answers from a fresh cache entry or loads the topic.
func (m *metadataCache) partitionCount(ctx context.Context, topic string) (int32, error) {
	if n, ok := m.cachedCount(topic, m.maxAge); ok {
		return n, nil
	}
	if err := m.refresh(ctx, topic); err != nil {
		return 0, err
	}
	if n, ok := m.cachedCount(topic, anyAge); ok {
		return n, nil
	}
	return 0, kerr.UnknownTopicOrPartition
}

func (m *metadataCache) cachedCount(topic string, maxAge time.Duration) (int32, bool) {
	tm := m.snap.Load().topics[topic]
	if tm == nil || time.Since(tm.loadedAt) > maxAge {
		return 0, false
	}
	return int32(len(tm.partitions)), true
}

// topicID returns the cached id of topic, loading it if needed.
func (m *metadataCache) topicID(ctx context.Context, topic string) ([16]byte, error) {
	if _, err := m.partitionCount(ctx, topic); err != nil {
		return [16]byte{}, err
	}
	if tm := m.snap.Load().topics[topic]; tm != nil {
		return tm.id, nil
	}
	return [16]byte{}, kerr.UnknownTopicOrPartition
}

// refresh loads topic, sharing the load with concurrent callers.
func (m *metadataCache) refresh(ctx context.Context, topic string) error {
	m.mu.Lock()
	f := m.flights[topic]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		m.flights[topic] = f
		go m.runFlight(f, topic)
	}
	m.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *metadataCache) runFlight(f *flight, topic string) {
	ctx, cancel := context.WithTimeout(m.base, m.timeout)
	_, f.err = m.load(ctx, []string{topic})
	cancel()
	if isContextError(f.err) && m.base.Err() == nil {
		// Our own bound ran out, not a caller's context (a broker that
		// hangs up on every attempt, say): retriable, as for any call.
		f.err = fmt.Errorf("no metadata answer within %s: %w", m.timeout, kerr.RequestTimedOut)
	}
	m.mu.Lock()
	delete(m.flights, topic)
	m.mu.Unlock()
	close(f.done)
}

// load issues one Metadata request (nil topics: all of them), stores what
// it learned and returns the partition count of every healthy non-internal
// topic. With exactly one topic asked for, that topic's error is returned.
func (m *metadataCache) load(ctx context.Context, topics []string) (map[string]int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	if topics != nil {
		req.Topics = make([]kmsg.MetadataRequestTopic, 0, len(topics))
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	}
	req.AllowAutoTopicCreation = false
	kresp, err := m.kgo.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.MetadataResponse)
	counts, errs := m.store(resp)
	if len(topics) == 1 {
		if err, ok := errs[topics[0]]; ok {
			return nil, err
		}
	}
	return counts, nil
}

// store replaces the broker list and the answered topics in the cache.
func (m *metadataCache) store(resp *kmsg.MetadataResponse) (map[string]int32, map[string]error) {
	now := time.Now()
	brokers := make(map[int32]string, len(resp.Brokers))
	for _, b := range resp.Brokers {
		brokers[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	counts := make(map[string]int32, len(resp.Topics))
	errs := make(map[string]error)
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.snap.Load()
	next := &metaSnapshot{topics: make(map[string]*topicMeta, len(old.topics)+len(resp.Topics)), brokers: brokers}
	for name, tm := range old.topics {
		next.topics[name] = tm
	}
	defer m.snap.Store(next)
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic == nil {
			continue
		}
		name := *t.Topic
		if t.ErrorCode != 0 {
			delete(next.topics, name)
			errs[name] = kerr.ErrorForCode(t.ErrorCode)
			continue
		}
		tm := newTopicMeta(t, now, old.topics[name])
		next.topics[name] = tm
		if !tm.internal {
			counts[name] = int32(len(tm.partitions))
		}
	}
	return counts, errs
}

// newTopicMeta is what the cache keeps of t, loaded at now. The
// partitions of old, the topic's entry so far, are kept when t says the
// same of every one: the coordinator reads every topic every
// metadata_interval, and a topic of 10,000 partitions made 120 KB of new
// partitions each time, for nothing had changed (the entries are never
// modified, so snapshots share them).
func newTopicMeta(t *kmsg.MetadataResponseTopic, now time.Time, old *topicMeta) *topicMeta {
	tm := &topicMeta{id: t.TopicID, internal: t.IsInternal, loadedAt: now}
	if old != nil && old.id == t.TopicID && samePartitions(old.partitions, t.Partitions) {
		tm.partitions = old.partitions
		return tm
	}
	tm.partitions = make([]partitionMeta, len(t.Partitions))
	for i := range tm.partitions {
		tm.partitions[i] = partitionMeta{leader: -1, epoch: -1, code: kerr.LeaderNotAvailable.Code}
	}
	for _, p := range t.Partitions {
		if p.Partition < 0 || int(p.Partition) >= len(tm.partitions) {
			continue // a gap in the numbering: the slot stays leaderless
		}
		tm.partitions[p.Partition] = partitionMeta{leader: p.Leader, epoch: p.LeaderEpoch, code: p.ErrorCode}
	}
	return tm
}

// samePartitions reports whether an answer's partitions, numbered 0 to
// n-1 in order, are exactly what cached holds (an answer in another
// order, or with gaps, is taken as new).
func samePartitions(cached []partitionMeta, answer []kmsg.MetadataResponseTopicPartition) bool {
	if len(cached) != len(answer) {
		return false
	}
	for i := range answer {
		p := &answer[i]
		if int(p.Partition) != i || cached[i] != (partitionMeta{leader: p.Leader, epoch: p.LeaderEpoch, code: p.ErrorCode}) {
			return false
		}
	}
	return true
}
