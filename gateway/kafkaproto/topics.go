package kafkaproto

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/broker"
)

// topicInfo is what the listener needs to know of one Kafka topic.
type topicInfo struct {
	id         [16]byte
	partitions int32
	internal   bool
}

// topicCache is the cluster's topic list, loaded with one Metadata
// request and reused for maxAge; loads are serialized, so a burst of
// Metadata requests costs one load.
type topicCache struct {
	broker *broker.Client
	maxAge time.Duration

	mu     sync.Mutex
	loaded time.Time
	gen    uint64 // counts the loads: a list read again is a new gen
	topics map[string]topicInfo
	byID   map[[16]byte]string
}

// errNoBroker: a listener built without a broker (its unit tests) has no
// topic list.
var errNoBroker = errors.New("kafkaproto: no broker")

func newTopicCache(b *broker.Client, maxAge time.Duration) *topicCache {
	return &topicCache{broker: b, maxAge: maxAge}
}

// get returns the topic list, loading it when older than maxAge or when
// refresh is set and the last load is older than a second.
func (t *topicCache) get(ctx context.Context, refresh bool) (map[string]topicInfo, map[[16]byte]string, error) {
	topics, byID, _, err := t.getGen(ctx, refresh)
	return topics, byID, err
}

// getGen is get with the load's gen: equal gens are the same list.
func (t *topicCache) getGen(ctx context.Context, refresh bool) (map[string]topicInfo, map[[16]byte]string, uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	age := time.Since(t.loaded)
	if t.topics != nil && age < t.maxAge && (!refresh || age < time.Second) {
		return t.topics, t.byID, t.gen, nil
	}
	if t.broker == nil {
		return nil, nil, 0, errNoBroker
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // all
	kresp, err := t.broker.Request(ctx, req)
	if err != nil {
		if t.topics != nil {
			return t.topics, t.byID, t.gen, nil // stale beats nothing; the broker is unreachable
		}
		return nil, nil, 0, err
	}
	resp := kresp.(*kmsg.MetadataResponse)
	topics := make(map[string]topicInfo, len(resp.Topics))
	byID := make(map[[16]byte]string, len(resp.Topics))
	for _, rt := range resp.Topics {
		if rt.Topic == nil || rt.ErrorCode != 0 {
			continue
		}
		topics[*rt.Topic] = topicInfo{id: rt.TopicID, partitions: int32(len(rt.Partitions)), internal: rt.IsInternal}
		byID[rt.TopicID] = *rt.Topic
	}
	t.topics, t.byID, t.loaded = topics, byID, time.Now()
	t.gen++
	return topics, byID, t.gen, nil
}

// partitionKnown reports whether topic has partition, refreshing once
// when it does not (a topic just created or grown).
func (t *topicCache) partitionKnown(ctx context.Context, topic string, partition int32) (topicInfo, int16) {
	for _, refresh := range []bool{false, true} {
		topics, _, err := t.get(ctx, refresh)
		if err != nil {
			return topicInfo{}, kerr.LeaderNotAvailable.Code
		}
		if ti, ok := topics[topic]; ok && partition >= 0 && partition < ti.partitions {
			return ti, 0
		}
	}
	return topicInfo{}, kerr.UnknownTopicOrPartition.Code
}
