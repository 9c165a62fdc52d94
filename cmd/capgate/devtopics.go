package main

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/ocap"
)

// devTopicName is a Kafka topic name (Kafka's own rule: 1-249 of
// [a-zA-Z0-9._-], not "." or "..").
var devTopicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// devTopicsMax bounds the topics --topic may add, and the partitions of
// one: the embedded Kafka holds them all in memory.
const (
	devTopicsMax          = 100
	devTopicPartitionsMax = 1000
)

// devTopics are the topics capgate dev creates in its embedded Kafka:
// demo and each --topic NAME[:PARTITIONS]. There was no way to get
// another: kcat -P to a missing topic waited and dropped its line, the
// embedded Kafka creating no topic on use, and nothing said how
// (newuser10).
func (f devFlags) devTopics() (map[string]int32, error) {
	topics := map[string]int32{devTopic: devPartitions}
	if len(f.topics) > devTopicsMax {
		return nil, usageErrorf("--topic: at most %d topics, got %d", devTopicsMax, len(f.topics))
	}
	for _, arg := range f.topics {
		name, count, hasCount := strings.Cut(arg, ":")
		partitions := int64(devPartitions)
		if hasCount {
			n, err := strconv.ParseInt(count, 10, 32)
			if err != nil || n < 1 || n > devTopicPartitionsMax {
				return nil, usageErrorf("--topic %s: want NAME or NAME:PARTITIONS with 1 to %d partitions, e.g. orders:6", arg, devTopicPartitionsMax)
			}
			partitions = n
		}
		switch {
		case !devTopicName.MatchString(name) || name == "." || name == "..":
			return nil, usageErrorf("--topic %s: a topic name is 1 to 249 letters, digits, '.', '_' or '-' (Kafka's rule)", arg)
		case strings.HasPrefix(name, "__") || strings.HasPrefix(name, "capgate-state"):
			return nil, usageErrorf("--topic %s: names starting __ (Kafka's own) or capgate-state (capgate's state logs) are granted to no client", arg)
		}
		if _, dup := topics[name]; dup {
			return nil, usageErrorf("--topic %s: %s is given twice (demo is always created)", arg, name)
		}
		topics[name] = int32(partitions)
	}
	return topics, nil
}

// kafkaTopics is what the started embedded Kafka holds, for the banner:
// the data dir keeps the topics of earlier runs, and --topic of one it
// has keeps that one's partitions. The banner named only this run's
// --topic flags, with their counts (newuser11). Kafka's own topics and
// capgate's state logs are left out (no client is granted them); when
// Kafka cannot be asked, what this run created (created) is shown.
func kafkaTopics(ctx context.Context, kafka *broker.Client, created map[string]int32, log *zap.Logger) map[string]int32 {
	counts, err := kafka.Topics(ctx)
	if err != nil {
		log.Warn("could not list the embedded Kafka's topics for the banner", zap.Error(err))
		return created
	}
	maps.DeleteFunc(counts, func(topic string, _ int32) bool { return ocap.InternalTopic(topic) })
	return counts
}

// devTopicsNote is the banner's words for the topics: demo first, then
// the others by name.
func devTopicsNote(topics map[string]int32) string {
	if len(topics) == 1 && topics[devTopic] > 0 {
		return fmt.Sprintf("embedded; topic %q, %d partitions", devTopic, topics[devTopic])
	}
	names := slices.Sorted(maps.Keys(topics))
	var parts []string
	if n, ok := topics[devTopic]; ok {
		parts = append(parts, fmt.Sprintf("%q %d partitions", devTopic, n))
	}
	for _, name := range names {
		if name != devTopic {
			parts = append(parts, fmt.Sprintf("%q %d", name, topics[name]))
		}
	}
	return "embedded; topics " + strings.Join(parts, ", ")
}
