package group

import (
	"maps"
	"slices"
)

// updateTopics applies topic metadata. New partitions and new topics
// matching a member's pattern trigger reassignment of the groups that may
// read them; deleted topics are revoked (their epochs are kept, so a
// recreated topic never reuses one). The shell sends every topic at each
// metadata read: only the changed ones are sorted (the whole map was,
// every metadata_interval, ~ms at 10,000 topics with nothing changed).
func (m *Machine) updateTopics(e Topics) {
	var grown, added, deleted []string
	for topic, count := range e.Partitions {
		if old := m.topics[topic]; topic != "" && count > old {
			grown = append(grown, topic)
		}
	}
	slices.Sort(grown)
	for _, topic := range grown {
		if _, known := m.topics[topic]; !known {
			added = append(added, topic)
		}
		m.topics[topic] = e.Partitions[topic]
		m.putRecord(recordKey{kind: keyTopic, first: topic}, TopicRecord{Topic: topic, Partitions: e.Partitions[topic]})
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
	pre := e.Hits.usable(m.topicNames, m.topicNames.Version(), added)
	m.topicNames.change(added, deleted)
	tc := topicsMatching{added: added, pre: pre, matched: make(map[tenantPattern]patternHits), budget: make(map[string]int)}
	for _, name := range sortedKeys(m.groups) {
		m.topicsChanged(m.groups[name], grown, deleted, &tc)
	}
}

// A topic change's matching in the loop (each pattern member's pattern
// against the added topics) is bounded per tenant: a tenant's distinct
// patterns together take at most limits.topic_pattern_steps per change,
// so one tenant holding many members with distinct costly patterns costs
// every other tenant's requests that much at most, not patterns × added
// topics. A member whose pattern is not matched within its tenant's
// budget (or, alone, within the bound) keeps what it matched before, less
// deleted topics, and is marked stale (member.patternStale): describe
// says so (topic_pattern_stale), it follows no new topic until it
// rejoins, when its pattern is matched again as a join's (refused 400
// naming topic_pattern_steps if it is over the bound then). It is not
// fenced: its partitions go on flowing; what it misses is the topics
// created since.

// tenantPattern is a pattern text as one tenant's: each tenant pays for
// its own patterns, even when another holds the same text.
type tenantPattern struct{ tenant, text string }

// patternHits is a pattern's matches among a change's added topics, or
// over: its matching ran past its tenant's budget; or deferred: its
// tenant's matching comes after the change (DeferredHits), the change
// neither adds topics to its members nor marks them stale.
type patternHits struct {
	topics   []string
	over     bool
	deferred bool
}

// topicsMatching is one updateTopics' matching: the added topics, each
// tenant's patterns' matches among them, and each tenant's steps left.
type topicsMatching struct {
	added []string
	// pre: the shell's matches of the added topics (Topics.Hits), taken
	// as they are; a pattern not in it is matched here.
	pre     map[tenantPattern]patternHits
	matched map[tenantPattern]patternHits
	budget  map[string]int // tenant → steps left (absent: limits.topic_pattern_steps)
}

// hits is mem's pattern's matches among the added topics, matched once
// per tenant and text within the tenant's budget.
func (m *Machine) hits(mem *member, tc *topicsMatching) patternHits {
	tenant := mem.credential.tenant()
	key := tenantPattern{tenant: tenant, text: mem.patternText}
	if h, ok := tc.matched[key]; ok {
		return h
	}
	if h, ok := tc.pre[key]; ok {
		tc.matched[key] = h
		return h
	}
	left, ok := tc.budget[tenant]
	if !ok {
		left = m.cfg.Limits.TopicPatternSteps
	}
	topics, steps, over := matchBounded(mem.pattern, tc.added, left)
	m.patternSteps += int64(steps)
	h := patternHits{topics: topics, over: over}
	tc.budget[tenant] = max(left-steps, 0)
	tc.matched[key] = h
	return h
}

// topicsChanged re-resolves pattern members of g and queues g for
// reassignment if any change concerns it. A pattern's matches among the
// added topics come from the shell's (Topics.Hits: its tenant's texts in
// order within its budget) when they were made for this change, else
// from the loop, its members taken in id order.
func (m *Machine) topicsChanged(g *group, grown, deleted []string, tc *topicsMatching) {
	affected := false
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		mem := g.members[id]
		if mem.pattern == nil {
			continue
		}
		if len(tc.added) > 0 && !mem.patternStale {
			h := m.hits(mem, tc)
			if h.over {
				m.markStale(mem)
			}
			for _, t := range h.topics {
				if !mem.resolved[t] {
					mem.resolved[t] = true
					g.subscribed[t]++
				}
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

// deferredHits applies a deferred tenant's matches of a change's added
// topics (TopicHits.MatchDeferred), made outside the loop after the
// change went in: each live member of its texts not stale takes the hit
// topics it does not hold that still exist (one deleted since is not
// taken), or is marked stale where its tenant's budget did not cover its
// text. A member that joined or rejoined since matched them at its join:
// taking them again changes nothing. Hits of another machine's names
// (a restore since) are ignored: the restore matched everything.
func (m *Machine) deferredHits(e DeferredHits) {
	th := e.Hits
	if th == nil || th.names != m.topicNames || len(th.hits) == 0 {
		return
	}
	for _, name := range sortedKeys(m.groups) {
		g := m.groups[name]
		affected := false
		for _, id := range slices.Sorted(maps.Keys(g.members)) {
			mem := g.members[id]
			if mem.pattern == nil || mem.patternStale {
				continue
			}
			h, ok := th.hits[tenantPattern{tenant: mem.credential.tenant(), text: mem.patternText}]
			switch {
			case !ok:
				continue
			case h.over:
				m.markStale(mem)
				continue
			}
			for _, t := range h.topics {
				if _, exists := m.topics[t]; exists && !mem.resolved[t] {
					mem.resolved[t] = true
					g.subscribed[t]++
					affected = true
				}
			}
			m.recharge(mem)
		}
		if affected {
			m.queueReassign(g)
		}
	}
}
