package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ensureTopics creates the state and snapshot topics when missing and
// checks the ones that exist:
//
//   - state topic: cleanup.policy=compact (one record per live key stays;
//     deletes are tombstones, kept delete.retention.ms), min.compaction.lag
//     0; an existing one must compact and must not delete (a "delete"
//     policy would drop live state with age);
//   - snapshot topic: cleanup.policy=delete, retention.ms (only recent
//     snapshots are read);
//   - both: exactly Shards partitions (a shard is a partition).
func (t *kafkaTransport) ensureTopics(ctx context.Context) error {
	state := map[string]*string{
		"cleanup.policy":      ptr("compact"),
		"delete.retention.ms": ptr(strconv.FormatInt(t.opts.TombstoneRetention.Milliseconds(), 10)),
	}
	snapshots := map[string]*string{
		"cleanup.policy": ptr("delete"),
		"retention.ms":   ptr(strconv.FormatInt(t.opts.SnapshotRetention.Milliseconds(), 10)),
	}
	for _, topic := range []struct {
		name    string
		configs map[string]*string
	}{{t.opts.Topic, state}, {t.opts.SnapshotTopic, snapshots}} {
		if err := t.ensureTopic(ctx, topic.name, topic.configs); err != nil {
			return fmt.Errorf("store: kafka: topic %s: %w", topic.name, err)
		}
	}
	if err := t.checkStatePolicy(ctx); err != nil {
		return fmt.Errorf("store: kafka: topic %s: %w", t.opts.Topic, err)
	}
	details, err := t.adm.ListTopics(ctx, t.opts.Topic)
	if err != nil {
		return fmt.Errorf("store: kafka: topic %s: %w", t.opts.Topic, err)
	}
	t.topicID = details[t.opts.Topic].ID
	return nil
}

func ptr(s string) *string { return &s }

// ensureTopic creates topic when the cluster does not have it and checks
// its partitions. An existing topic is only described: a CreateTopics
// goes to the cluster's controller, and one unreachable (being elected;
// kfake's never moves off a removed broker) stopped every replica from
// following — even from taking over — a log it could read (e2e/ha
// TestStateLogLeaderMoves: "create: context deadline exceeded" for a
// minute after the broker went, on every replica).
func (t *kafkaTransport) ensureTopic(ctx context.Context, topic string, configs map[string]*string) error {
	detail, err := t.listTopic(ctx, topic)
	if err != nil {
		return err
	}
	if errors.Is(detail.Err, kerr.UnknownTopicOrPartition) {
		resp, err := t.adm.CreateTopic(ctx, t.opts.Shards, t.opts.ReplicationFactor, configs, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create: %w", err)
		}
		if detail, err = t.describeTopic(ctx, topic); err != nil {
			return err
		}
		if errors.Is(detail.Err, kerr.UnknownTopicOrPartition) {
			return errors.New("missing after create")
		}
	}
	switch {
	case detail.Err != nil:
		return detail.Err
	case int32(detail.Partitions) != t.opts.Shards:
		return fmt.Errorf("%d partitions, config says %d shards", detail.Partitions, t.opts.Shards)
	}
	return nil
}

// describeTopic is topic's metadata, asked of a broker (kadm's ListTopics
// answers from the client's metadata cache, which still lists a topic
// just created as missing); a topic the cluster does not have has Err
// kerr.UnknownTopicOrPartition.
func (t *kafkaTransport) describeTopic(ctx context.Context, topic string) (topicDetail, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, t.base)
	if err != nil {
		return topicDetail{}, err
	}
	for _, got := range resp.Topics {
		if got.Topic != nil && *got.Topic == topic {
			return topicDetail{Err: kerr.ErrorForCode(got.ErrorCode), Partitions: len(got.Partitions)}, nil
		}
	}
	return topicDetail{Err: kerr.UnknownTopicOrPartition}, nil
}

// listTopic is topic's metadata as kadm lists it (from the client's
// metadata cache, refreshed as kgo sees fit): a Kafka that cannot be
// reached fails it at once, where describeTopic's own request is retried
// until ctx ends (a replica's /readyz then told nothing of Kafka for the
// whole open: TestLeaderWithKafkaGoneSaysWhyAndStops).
func (t *kafkaTransport) listTopic(ctx context.Context, topic string) (topicDetail, error) {
	details, err := t.adm.ListTopics(ctx, topic)
	if err != nil {
		return topicDetail{}, err
	}
	detail, ok := details[topic]
	if !ok {
		return topicDetail{Err: kerr.UnknownTopicOrPartition}, nil
	}
	return topicDetail{Err: detail.Err, Partitions: len(detail.Partitions)}, nil
}

// topicDetail is what ensureTopic checks of a topic.
type topicDetail struct {
	Err        error
	Partitions int
}

// checkStatePolicy refuses a state topic that is not compacted, or that
// also deletes by age or size.
func (t *kafkaTransport) checkStatePolicy(ctx context.Context) error {
	configs, err := t.adm.DescribeTopicConfigs(ctx, t.opts.Topic)
	if err != nil {
		return fmt.Errorf("describe configs: %w", err)
	}
	config, err := configs.On(t.opts.Topic, nil)
	if err == nil {
		err = config.Err
	}
	if err != nil {
		return fmt.Errorf("describe configs: %w", err)
	}
	for _, c := range config.Configs {
		if c.Key != "cleanup.policy" || c.Value == nil {
			continue
		}
		policies := strings.Split(strings.ReplaceAll(*c.Value, " ", ""), ",")
		if !slices.Contains(policies, "compact") || slices.Contains(policies, "delete") {
			return fmt.Errorf("cleanup.policy=%s, want compact (and not delete: it would drop live state)", *c.Value)
		}
		return nil
	}
	return errors.New("cleanup.policy not reported, want compact")
}
