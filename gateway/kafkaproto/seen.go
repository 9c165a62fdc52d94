package kafkaproto

import "slices"

// seenParts tells a partition named again in one request (a Fetch or a
// ListOffsets may name a partition twice; a Kafka client never does):
// a scan of the few named so far, kept on the stack, then a map once
// there are more — a group member's Fetch names a handful, and an
// ordinary request allocates nothing for it.
type seenParts struct {
	few  [seenScanMax]partKey
	n    int
	many map[partKey]struct{}
}

// seenScanMax is how many partitions seenParts scans before it builds
// its map.
const seenScanMax = 32

// again reports whether topic/partition was named before, and records it.
func (s *seenParts) again(topic string, partition int32) bool {
	k := partKey{topic: topic, partition: partition}
	if s.many == nil {
		if slices.Contains(s.few[:s.n], k) {
			return true
		}
		if s.n < seenScanMax {
			s.few[s.n] = k
			s.n++
			return false
		}
		s.many = make(map[partKey]struct{}, 2*seenScanMax)
		for _, f := range s.few {
			s.many[f] = struct{}{}
		}
	}
	if _, ok := s.many[k]; ok {
		return true
	}
	s.many[k] = struct{}{}
	return false
}
