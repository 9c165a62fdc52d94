package coordinator

import (
	"context"
	"sync"

	"go.uber.org/zap"
)

// mirror copies committed offsets into Kafka's own group offsets
// (mirror_offsets), off the event loop. The loop adds offsets; one
// goroutine commits what accumulated, so a slow broker coalesces commits
// instead of queueing them (the pending set is bounded by the partitions
// of the groups).
type mirror struct {
	mu      sync.Mutex
	pending map[string]map[string]map[int32]int64
	signal  chan struct{}
}

func newMirror() *mirror {
	return &mirror{pending: make(map[string]map[string]map[int32]int64), signal: make(chan struct{}, 1)}
}

// add records one committed offset; it never blocks.
func (m *mirror) add(group, topic string, partition int32, offset int64) {
	m.mu.Lock()
	topics := m.pending[group]
	if topics == nil {
		topics = make(map[string]map[int32]int64)
		m.pending[group] = topics
	}
	if topics[topic] == nil {
		topics[topic] = make(map[int32]int64)
	}
	topics[topic][partition] = offset
	m.mu.Unlock()
	select {
	case m.signal <- struct{}{}:
	default:
	}
}

func (m *mirror) take() map[string]map[string]map[int32]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.pending
	m.pending = make(map[string]map[string]map[int32]int64)
	return out
}

// run commits pending offsets until ctx is done. A failed commit is
// logged and dropped: the next commit of the partition carries a newer
// offset, and capgate's own store stays the source of truth.
func (m *mirror) run(ctx context.Context, c *Coordinator) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.signal:
		}
		for group, offsets := range m.take() {
			if err := c.broker.CommitGroupOffsets(ctx, group, offsets); err != nil && ctx.Err() == nil {
				c.log.Warn("mirror offsets to kafka", zap.String("group", group), zap.Error(err))
			}
		}
	}
}
