package main

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
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

// devTopicsNote is the banner's words for the topics: demo first.
func devTopicsNote(topics map[string]int32) string {
	if len(topics) <= 1 {
		return fmt.Sprintf("embedded; topic %q, %d partitions", devTopic, devPartitions)
	}
	names := make([]string, 0, len(topics))
	for name := range topics {
		if name != devTopic {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	parts := []string{fmt.Sprintf("%q %d partitions", devTopic, devPartitions)}
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%q %d", name, topics[name]))
	}
	return "embedded; topics " + strings.Join(parts, ", ")
}
