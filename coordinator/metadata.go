package coordinator

import (
	"context"
	"maps"
	"slices"
	"sync/atomic"
	"time"

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
	if err := c.submit(group.Topics{Partitions: counts, Deleted: deleted, Hits: c.matchAdded(counts)}); err != nil {
		return
	}
	if len(deleted) > 0 {
		c.log.Info("topics deleted", zap.Strings("topics", deleted))
	}
}

// matchAdded matches the topics of counts the machine does not hold yet
// against its live patterns here, in the metadata reader's goroutine,
// for the loop to take as they are (group.TopicHits): a topic change's
// matching, within each tenant's limits.topic_pattern_steps (~30–50 ms
// of a core at the default), was done in the loop — tenants × that per
// change, every tenant's requests waiting (patloop2). The work here is
// bounded the same way and shares the processors instead; nil when
// nothing is new. (topicHitsInLoop: the tests' baseline, the loop
// matching as before.)
func (c *Coordinator) matchAdded(counts map[string]int32) *group.TopicHits {
	if c.livePatterns == nil || topicHitsInLoop.Load() {
		return nil
	}
	return c.livePatterns.MatchAdded(c.patterns.names, counts, c.cfg.Groups.Limits)
}

// topicHitsInLoop makes matchAdded answer nil, so the loop matches new
// topics itself: the baseline the tests measure beside (export_test.go).
var topicHitsInLoop atomic.Bool

// partitionCount is a topic's partition count as last read from Kafka (0
// for a topic Kafka does not have); known is false before the first read.
func (c *Coordinator) partitionCount(topic string) (n int32, known bool) {
	counts := c.topics.Load()
	if counts == nil {
		return 0, false
	}
	return (*counts)[topic], true
}
