package broker

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Special ListOffsets timestamps.
const (
	timestampEarliest = -2
	timestampLatest   = -1
)

// Offsets returns the partition's log start offset and high watermark (the
// next offset to be written), asking its leader.
func (c *Client) Offsets(ctx context.Context, topic string, partition int32) (earliest, latest int64, err error) {
	bounded, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	earliest, latest, err = c.offsets(bounded, topic, partition)
	if err != nil {
		return 0, 0, c.boundedError(ctx, "list offsets", err)
	}
	return earliest, latest, nil
}

func (c *Client) offsets(ctx context.Context, topic string, partition int32) (earliest, latest int64, err error) {
	err = c.onLeader(ctx, topic, partition, func(r route) error {
		// One request cannot name a partition twice; the two requests
		// share the leader's connection, pipelined.
		earliestErr := make(chan error, 1)
		go func() {
			var err error
			earliest, err = c.listOffset(ctx, r, topic, partition, timestampEarliest)
			earliestErr <- err
		}()
		var latestErr error
		latest, latestErr = c.listOffset(ctx, r, topic, partition, timestampLatest)
		if err := <-earliestErr; err != nil {
			return err
		}
		return latestErr
	})
	return earliest, latest, err
}

func (c *Client) listOffset(ctx context.Context, r route, topic string, partition int32, timestamp int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.CurrentLeaderEpoch = r.epoch
	rp.Timestamp = timestamp
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{rp}
	req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
	kresp, err := c.kgo.Broker(int(r.leader)).Request(ctx, req)
	if err != nil {
		return 0, err
	}
	resp := kresp.(*kmsg.ListOffsetsResponse)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.Partition != partition {
				continue
			}
			if p.ErrorCode != 0 {
				return 0, kerr.ErrorForCode(p.ErrorCode)
			}
			return p.Offset, nil
		}
	}
	return 0, fmt.Errorf("list offsets response without partition %d", partition)
}

// CommitMarkedGroupOffsets writes offsets (topic -> partition -> next
// offset to consume) into Kafka's own offsets for group, as a simple
// commit (generation -1, no member), with marker as every partition's
// commit metadata: the offset mirror's ownership mark, which GroupOwner
// reads back (kcat and kadm show it; kafka-consumer-groups does not).
// Kafka refuses it while a consumer group of that name has live members
// and accepts it into an empty one, native or not: the mirror checks the
// group first (GroupOwner).
func (c *Client) CommitMarkedGroupOffsets(ctx context.Context, group, marker string, offsets map[string]map[int32]int64) error {
	if group == "" {
		return &BrokerError{Op: "commit offsets", Err: kerr.InvalidGroupID}
	}
	if len(offsets) == 0 {
		return nil
	}
	bounded, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	req, err := c.offsetCommitRequest(bounded, group, marker, offsets)
	if err != nil {
		return c.boundedError(ctx, "commit offsets", err)
	}
	kresp, err := c.kgo.Request(bounded, req)
	if err != nil {
		return c.boundedError(ctx, "commit offsets", err)
	}
	resp := kresp.(*kmsg.OffsetCommitResponse)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				err := fmt.Errorf("%s[%d]: %w", t.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
				return wrapError("commit offsets", err)
			}
		}
	}
	return nil
}

// offsetCommitRequest builds the simple commit; topics carry both name
// (below v10) and id (v10+), in sorted order.
func (c *Client) offsetCommitRequest(ctx context.Context, group, metadata string, offsets map[string]map[int32]int64) (*kmsg.OffsetCommitRequest, error) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = group
	req.Generation = -1
	req.MemberID = ""
	topics := make([]string, 0, len(offsets))
	for t := range offsets {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	for _, topic := range topics {
		id, err := c.meta.topicID(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", topic, err)
		}
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		parts := make([]int32, 0, len(offsets[topic]))
		for p := range offsets[topic] {
			parts = append(parts, p)
		}
		slices.Sort(parts)
		for _, p := range parts {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, offsets[topic][p], -1
			if metadata != "" {
				rp.Metadata = &metadata
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req, nil
}
