package coordinator

import (
	"context"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/capgate/capgate/coordinator/group"
)

// pollTopics reads topic metadata every metadata_interval until ctx is
// done. Partition-count increases and new topics matching a pattern
// trigger reassignment inside the machine.
func (c *Coordinator) pollTopics(ctx context.Context) {
	t := time.NewTicker(c.cfg.MetadataInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.refreshTopics(ctx)
		}
	}
}

// refreshTopics reads topics from Kafka once and feeds the machine. Topics
// that disappeared are reported deleted. Errors are logged: the machine
// keeps the last metadata.
func (c *Coordinator) refreshTopics(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.BrokerTimeout)
	defer cancel()
	start := time.Now()
	counts, err := c.broker.Topics(ctx)
	c.kafka.Record(start, err)
	if err != nil {
		if ctx.Err() == nil || ctx.Err() == context.DeadlineExceeded {
			c.log.Warn("read topic metadata", zap.Error(err))
		}
		return
	}
	// Internal topics are never matched, granted or shown (grantableTopics).
	maps.DeleteFunc(counts, func(topic string, _ int32) bool { return c.internalTopic(topic) })
	c.topicsMu.Lock()
	var deleted []string
	for _, topic := range slices.Sorted(maps.Keys(c.known)) {
		if _, ok := counts[topic]; !ok {
			deleted = append(deleted, topic)
		}
	}
	c.known = maps.Clone(counts)
	c.topicsMu.Unlock()
	snapshot := maps.Clone(counts)
	c.topics.Store(&snapshot)
	hits := c.matchAdded(counts)
	if err := c.submit(group.Topics{Partitions: counts, Deleted: deleted, Hits: hits}); err != nil {
		return
	}
	c.topicMatch.deferTenants(c, hits)
	if len(deleted) > 0 {
		c.log.Info("topics deleted", zap.Strings("topics", deleted))
	}
}

// matchAdded matches the topics of counts the machine does not hold yet
// against its live patterns here, in the metadata reader's goroutine,
// for the loop to take as they are (group.TopicHits): a topic change's
// matching, within each tenant's limits.topic_pattern_steps (~30–50 ms
// of a core at the default), was done in the loop — tenants × that per
// change, every tenant's requests waiting (patloop2). nil when nothing is
// new. (topicHitsInLoop: the tests' baseline, the loop matching as
// before.)
//
// Each tenant's matching is charged to it, and one tenant's patterns do
// not hold back the others' new topics (the attack: a tenant's
// topic_patterns_per_tenant costly patterns and a topic storm made
// every read match them before any tenant's new topics went in). Before
// the change is submitted a tenant's texts get topicMatchFirstSteps (the
// read's tenants topicMatchFirstTotal in all; a tenant whose
// tenant_member_rate owes gets none): a tenant whose texts are not
// matched within it is deferred — its members take the new topics from
// a DeferredHits event the deferred matcher submits after
// (topicMatching.run, within the tenant's whole topic_pattern_steps).
// The steps each tenant's texts took are charged to its
// tenant_member_rate (a token per patternWorkPerToken), as a join's
// match is, so its joins and reads wait on what its patterns cost.
func (c *Coordinator) matchAdded(counts map[string]int32) *group.TopicHits {
	if c.livePatterns == nil || topicHitsInLoop.Load() {
		return nil
	}
	now := time.Now()
	first := func(tenant string, spent int64) int {
		if topicMatchDeferNone.Load() {
			return group.FirstPassAll
		}
		if c.share.rate.owed(tenant, now) > 0 {
			return 0
		}
		return int(min(topicMatchFirstSteps, max(topicMatchFirstTotal-spent, 0)))
	}
	th := c.livePatterns.MatchAdded(c.patterns.names, counts, c.cfg.Groups.Limits, first)
	c.topicMatch.charge(c, th, "first")
	return th
}

// A read's first pass: each tenant's texts topicMatchFirstSteps, all
// tenants' topicMatchFirstTotal (~0.5 ms and ~8 ms of a quiet core).
// deferredReadsMax reads' deferred tenants wait for the deferred
// matcher at most; past it a read's deferred tenants are not matched —
// their texts count as past their budget, their members stale (keep
// their topics, follow no new one until they rejoin, as topics.go
// marks a member its tenant's budget does not cover).
const (
	topicMatchFirstSteps = 1 << 16
	topicMatchFirstTotal = 1 << 20
	deferredReadsMax     = 16
)

// topicMatching is the deferred matcher: the reads whose tenants
// matchAdded deferred, matched one at a time after their change went
// in, and the matching's metrics.
type topicMatching struct {
	reads    chan *group.TopicHits
	steps    *prometheus.CounterVec // by pass: first, deferred
	deferred *prometheus.CounterVec // tenants deferred, by outcome: matched, behind
}

func newTopicMatching() *topicMatching {
	return &topicMatching{
		reads: make(chan *group.TopicHits, deferredReadsMax),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capgate_coordinator_topic_change_match_steps_total",
			Help: "topicpattern steps matching new topics against the live patterns outside the loop, by pass: first (before the change is submitted), deferred (a tenant's after it).",
		}, []string{"pass"}),
		deferred: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capgate_coordinator_topic_change_deferred_total",
			Help: "Tenants whose matching of a read's new topics was deferred past its change, by outcome: matched (after the change), behind (the deferred matcher had deferredReadsMax reads waiting: its patterns marked stale).",
		}, []string{"outcome"}),
	}
}

func (tm *topicMatching) register(r *prometheus.Registry) { r.MustRegister(tm.steps, tm.deferred) }

// charge counts th's steps and charges each tenant its part.
func (tm *topicMatching) charge(c *Coordinator, th *group.TopicHits, pass string) {
	if th == nil {
		return
	}
	for _, tenant := range slices.Sorted(maps.Keys(th.TenantWork)) {
		c.share.charge(tenant, int(th.TenantWork[tenant]/patternWorkPerToken))
	}
	tm.steps.WithLabelValues(pass).Add(float64(th.Work))
}

// deferTenants queues th's deferred tenants for the deferred matcher,
// once th's change was submitted; with deferredReadsMax reads waiting
// already, their texts are submitted as past their budget instead.
func (tm *topicMatching) deferTenants(c *Coordinator, th *group.TopicHits) {
	tenants := th.Deferred()
	if len(tenants) == 0 {
		return
	}
	select {
	case tm.reads <- th:
		return
	default:
	}
	for _, tenant := range tenants {
		tm.deferred.WithLabelValues("behind").Inc()
		if c.submit(group.DeferredHits{Hits: th.MatchDeferred(tenant, c.cfg.Groups.Limits, true)}) != nil {
			return
		}
	}
	c.log.Warn("new topics not matched for tenants whose matching was deferred: the deferred matcher is behind; their pattern members are stale until they rejoin",
		zap.Int("tenants", len(tenants)), zap.Int("reads_waiting", deferredReadsMax))
}

// run matches the deferred tenants of each read queued, one read and
// one tenant at a time, each within its topic_pattern_steps and charged
// to it, and submits each tenant's hits, until ctx is done (what is
// left is matched by the next start's restore).
func (tm *topicMatching) run(ctx context.Context, c *Coordinator) {
	for {
		select {
		case <-ctx.Done():
			return
		case th := <-tm.reads:
			for _, tenant := range th.Deferred() {
				late := th.MatchDeferred(tenant, c.cfg.Groups.Limits, false)
				tm.charge(c, late, "deferred")
				tm.deferred.WithLabelValues("matched").Inc()
				if ctx.Err() != nil || c.submit(group.DeferredHits{Hits: late}) != nil {
					return
				}
			}
		}
	}
}

// topicHitsInLoop makes matchAdded answer nil, so the loop matches new
// topics itself: the baseline the tests measure beside (export_test.go).
var topicHitsInLoop atomic.Bool

// topicMatchDeferNone makes matchAdded match every tenant's texts in
// its first pass, none deferred (as before the deferred matcher): the
// baseline the tests measure beside.
var topicMatchDeferNone atomic.Bool

// partitionCount is a topic's partition count as last read from Kafka (0
// for a topic Kafka does not have); known is false before the first read.
func (c *Coordinator) partitionCount(topic string) (n int32, known bool) {
	counts := c.topics.Load()
	if counts == nil {
		return 0, false
	}
	return (*counts)[topic], true
}
