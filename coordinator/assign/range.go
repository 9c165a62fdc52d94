package assign

// Range is Kafka's RangeAssignor applied per topic: the topic's partitions,
// in order, are cut into contiguous ranges over the members subscribed to
// it, sorted by member ID; the first len(partitions) % len(members) members
// get one extra. Current owners are ignored. Pins are then applied on top:
// a pinned partition goes to its member if that member is present and
// subscribed, and no other partition changes hands because of it.
func Range(in Input) Assignment {
	l := newLayout(in)
	out := make(Assignment, len(l.partitions))
	for start := 0; start < len(l.partitions); {
		t := l.partitionTopic[start]
		end := start + 1
		for end < len(l.partitions) && l.partitionTopic[end] == t {
			end++
		}
		l.assignRange(out, l.partitions[start:end], l.subscribers[t])
		start = end
	}
	for p := range in.Pins {
		if _, assignable := out[p]; !assignable {
			continue
		}
		if m, ok := l.validPin(in.Pins, p); ok {
			out[p] = l.memberIDs[m]
		}
	}
	return out
}

// assignRange cuts one topic's partitions into ranges over subscribers.
func (l *layout) assignRange(out Assignment, partitions []Partition, subscribers []int32) {
	share := len(partitions) / len(subscribers)
	extra := len(partitions) % len(subscribers)
	next := 0
	for i, m := range subscribers {
		n := share
		if i < extra {
			n++
		}
		for _, p := range partitions[next : next+n] {
			out[p] = l.memberIDs[m]
		}
		next += n
	}
}
