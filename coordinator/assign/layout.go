package assign

import (
	"slices"
	"strings"
)

// layout is an Input in index form, independent of map iteration and of
// the order of Members and Partitions: members sorted by ID (duplicates
// merged), assignable partitions sorted and unique, and for every topic the
// sorted indexes of the members subscribed to it.
type layout struct {
	memberIDs   []string
	memberIndex map[string]int32
	subscribed  []map[string]bool // per member: its topic set
	// partitions holds every assignable partition (one with at least one
	// subscriber), sorted; partitionTopic maps each to its topic index.
	partitions     []Partition
	partitionTopic []int32
	topics         []string  // sorted, only topics with subscribers
	subscribers    [][]int32 // per topic: member indexes, ascending
}

func newLayout(in Input) *layout {
	l := &layout{}
	l.indexMembers(in.Members)
	l.indexPartitions(in.Partitions)
	return l
}

// indexMembers sorts members by ID and merges duplicate IDs by the union
// of their topic sets, so the result does not depend on Members order.
func (l *layout) indexMembers(members []Member) {
	sorted := slices.Clone(members)
	slices.SortStableFunc(sorted, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	l.memberIndex = make(map[string]int32, len(sorted))
	for _, member := range sorted {
		index, seen := l.memberIndex[member.ID]
		if !seen {
			l.memberIndex[member.ID] = int32(len(l.memberIDs))
			l.memberIDs = append(l.memberIDs, member.ID)
			l.subscribed = append(l.subscribed, member.Topics)
			continue
		}
		union := make(map[string]bool, len(l.subscribed[index])+len(member.Topics))
		for _, topics := range []map[string]bool{l.subscribed[index], member.Topics} {
			for topic, on := range topics {
				union[topic] = union[topic] || on
			}
		}
		l.subscribed[index] = union
	}
}

// indexPartitions sorts and deduplicates partitions, finds each topic's
// subscribers and drops the partitions of topics nobody subscribes to.
func (l *layout) indexPartitions(partitions []Partition) {
	sorted := slices.Clone(partitions)
	slices.SortFunc(sorted, comparePartitions)
	sorted = slices.Compact(sorted)
	topicIndex, subscribers := l.subscribersOf(sorted)

	remap := make([]int32, len(topicIndex)) // index among subscribed topics, or -1
	for i, p := range sorted {
		if i > 0 && p.Topic == sorted[i-1].Topic {
			continue
		}
		t := topicIndex[p.Topic]
		remap[t] = -1
		if len(subscribers[t]) > 0 {
			remap[t] = int32(len(l.topics))
			l.topics = append(l.topics, p.Topic)
			l.subscribers = append(l.subscribers, subscribers[t])
		}
	}
	l.partitions = sorted[:0]
	for _, p := range sorted {
		if t := remap[topicIndex[p.Topic]]; t >= 0 {
			l.partitions = append(l.partitions, p)
			l.partitionTopic = append(l.partitionTopic, t)
		}
	}
}

// subscribersOf indexes the topics of sorted partitions and lists each
// topic's subscribers in member order. It walks each member's own topic
// set rather than every (topic, member) pair: the cost is the size of the
// input, not topics × members.
func (l *layout) subscribersOf(sorted []Partition) (map[string]int32, [][]int32) {
	topicIndex := make(map[string]int32)
	for i, p := range sorted {
		if i == 0 || p.Topic != sorted[i-1].Topic {
			topicIndex[p.Topic] = int32(len(topicIndex))
		}
	}
	subscribers := make([][]int32, len(topicIndex))
	for m, topics := range l.subscribed {
		for topic, on := range topics {
			if t, known := topicIndex[topic]; known && on {
				subscribers[t] = append(subscribers[t], int32(m))
			}
		}
	}
	return topicIndex, subscribers
}

// eligible returns the index of member id if it is present and subscribed
// to topic.
func (l *layout) eligible(id, topic string) (int32, bool) {
	m, present := l.memberIndex[id]
	if !present || !l.subscribed[m][topic] {
		return -1, false
	}
	return m, true
}

// validPin returns the member partition p is pinned to, if that pin must be
// honoured.
func (l *layout) validPin(pins map[Partition]string, p Partition) (int32, bool) {
	id, pinned := pins[p]
	if !pinned {
		return -1, false
	}
	return l.eligible(id, p.Topic)
}

func comparePartitions(a, b Partition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	switch {
	case a.Partition < b.Partition:
		return -1
	case a.Partition > b.Partition:
		return 1
	}
	return 0
}
