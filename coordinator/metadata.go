package coordinator

import (
	"context"
	"maps"
	"slices"
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
	if err := c.submit(group.Topics{Partitions: counts, Deleted: deleted}); err != nil {
		return
	}
	if len(deleted) > 0 {
		c.log.Info("topics deleted", zap.Strings("topics", deleted))
	}
}

// partitionCount is a topic's partition count as last read from Kafka (0
// for a topic Kafka does not have); known is false before the first read.
func (c *Coordinator) partitionCount(topic string) (n int32, known bool) {
	counts := c.topics.Load()
	if counts == nil {
		return 0, false
	}
	return (*counts)[topic], true
}
