package group

import "slices"

// updateTopics applies topic metadata. New partitions and new topics
// matching a member's pattern trigger reassignment of the groups that may
// read them; deleted topics are revoked (their epochs are kept, so a
// recreated topic never reuses one).
func (m *Machine) updateTopics(e Topics) {
	var grown, added, deleted []string
	for _, topic := range sortedKeys(e.Partitions) {
		count := e.Partitions[topic]
		old, known := m.topics[topic]
		if topic == "" || count <= old {
			continue
		}
		m.topics[topic] = count
		m.putRecord(recordKey{kind: keyTopic, first: topic}, TopicRecord{Topic: topic, Partitions: count})
		grown = append(grown, topic)
		if !known {
			added = append(added, topic)
		}
	}
	for _, topic := range e.Deleted {
		if _, ok := m.topics[topic]; !ok {
			continue
		}
		delete(m.topics, topic)
		m.putRecord(recordKey{kind: keyTopic, first: topic}, TopicRecord{Topic: topic, Deleted: true})
		deleted = append(deleted, topic)
	}
	if len(grown) == 0 && len(deleted) == 0 {
		return
	}
	m.topicNames.change(added, deleted)
	matched := make(map[string][]string) // pattern text → the added topics it matches
	for _, name := range sortedKeys(m.groups) {
		m.topicsChanged(m.groups[name], grown, added, deleted, matched)
	}
}

// topicsChanged re-resolves pattern members of g and queues g for
// reassignment if any change concerns it. matched keeps, per pattern
// text, the added topics it matches, so the members of every group with
// one pattern (the common case: a fleet subscribed alike) match the
// added topics once.
func (m *Machine) topicsChanged(g *group, grown, added, deleted []string, matched map[string][]string) {
	affected := false
	for _, mem := range g.members {
		if mem.pattern == nil {
			continue
		}
		hits, ok := matched[mem.patternText]
		if !ok {
			hits, _ = matchNames(mem.pattern, max(mem.patternCost, 1), added)
			matched[mem.patternText] = hits
		}
		for _, t := range hits {
			if !mem.resolved[t] {
				mem.resolved[t] = true
				g.subscribed[t]++
			}
		}
		for _, t := range deleted {
			if mem.resolved[t] {
				delete(mem.resolved, t)
				if g.subscribed[t]--; g.subscribed[t] <= 0 {
					delete(g.subscribed, t)
				}
				affected = true
			}
		}
		m.recharge(mem)
	}
	for _, t := range slices.Concat(grown, deleted) {
		if g.subscribed[t] > 0 || g.created[t] > 0 {
			affected = true
		}
	}
	if affected {
		m.queueReassign(g)
	}
}
