package group

import (
	"fmt"
	"math/rand/v2"
	"regexp/syntax"
	"slices"
	"time"

	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/internal/topicpattern"
	"github.com/capgate/capgate/revocation"
)

// Restore rebuilds a machine after a restart from what the shell persisted.
// Every member gets its session timeout from now to come back, known
// gateways count as seen now with nothing acknowledged, capabilities issued
// before the restart are assumed to live until now+max_lease, and the sync
// log restarts above snap.SyncSeq so every gateway resynchronises from a
// reset snapshot. Handoffs in progress resume; the first Ready persists
// the new sync seq and re-sends revokes to holders being revoked from.
func Restore(cfg Config, rng *rand.Rand, snap Snapshot, now time.Time) (*Machine, error) {
	m, err := New(cfg, rng)
	if err != nil {
		return nil, err
	}
	m.now = now
	m.ready = Ready{}
	clear(m.persistIdx)
	m.log.init(cfg.SyncLogMax, snap.SyncSeq+1)
	m.epochFloor = snap.EpochFloor
	for _, t := range snap.Topics {
		m.topics[t.Topic] = t.Partitions
	}
	m.topicNames.change(sortedKeys(m.topics), nil)
	if err := m.restoreGroups(snap); err != nil {
		return nil, fmt.Errorf("group: restore: %w", err)
	}
	if err := m.restorePartitions(snap); err != nil {
		return nil, fmt.Errorf("group: restore: %w", err)
	}
	m.restoreSyncState(snap)
	m.ready = Ready{}
	clear(m.persistIdx)
	m.restoreLeases(snap.Leases)
	m.seqDirty = true
	for _, name := range sortedKeys(m.groups) {
		m.queueReassign(m.groups[name])
	}
	m.finish()
	return m, nil
}

func (m *Machine) restoreGroups(snap Snapshot) error {
	for _, r := range snap.Groups {
		if err := r.Config.validate(m.cfg); err != nil {
			return fmt.Errorf("group %q: %w", r.Group, err)
		}
		g := m.group(r.Group)
		g.cfg = r.Config
		m.setCreator(g, r.Creator, r.CreatorName)
	}
	// A tenant's pattern text → its matches (over: past the bound), so
	// members alike are matched once; each tenant's texts are matched
	// within restorePatternBudget × topic_pattern_steps in all, each
	// within topic_pattern_steps (restoreMatch).
	matched := make(map[tenantPattern]patternHits)
	budget := make(map[string]int)
	held := heldTopics(snap)
	for _, r := range snap.Members {
		sub, err := parseSubscription(r.Topics, r.TopicPattern)
		key := tenantPattern{tenant: r.Credential.tenant(), text: r.TopicPattern}
		escaped := false
		if err != nil && len(r.Topics) == 0 && joinedWrapped(r.TopicPattern) {
			// Joined before a pattern was parsed alone (topicpattern.Parse:
			// `x)|(?:.*` escaped the anchors then): it matches nothing,
			// stale, until it rejoins — refused then as any join with it.
			sub, err = subscription{pattern: topicpattern.Never(), patternText: r.TopicPattern}, nil
			matched[key], escaped = patternHits{over: true}, true
		}
		if err != nil {
			return fmt.Errorf("member %q of %q: %w", r.MemberID, r.Group, err)
		}
		h, ok := matched[key]
		if !ok && sub.pattern != nil {
			h = m.restoreMatch(sub.pattern, key.tenant, budget)
			matched[key] = h
		}
		// A pattern over its bound now (topics grew since it joined, or
		// its tenant's budget went to its other patterns) restores
		// marked stale as a topic change marks it (topics.go), until it
		// rejoins, keeping the topics of the partitions its member holds
		// or is being handed — as a stale pattern keeps the topics it
		// had: with none, each takeover handed away the partitions of
		// patterns admitted at their joins once the tenant's budget ran
		// out (TestRestoreKeepsPatternsAdmittedAtJoin). One left with no
		// topic at all (it held none, or its text no longer parses) is
		// unrestored: its next heartbeat removes it, telling it to join
		// again (heartbeatUnrestored), where a join's match (out of the
		// loop, paid by its tenant) gives it its topics — it was a
		// member with nothing assigned and no word why.
		sub.matches = h.topics
		if h.over && !escaped {
			sub.matches = m.keptTopics(held[memberKey{r.Group, r.MemberID}])
		}
		m.installMember(&member{
			group: m.group(r.Group), id: r.MemberID, instanceID: r.InstanceID, clientID: r.ClientID, credential: r.Credential,
			topics: sub.topics, pattern: sub.pattern, patternText: sub.patternText, patternCost: sub.patternCost,
			patternStale: h.over, patternUnrestored: h.over && len(sub.matches) == 0, sessionTimeout: r.SessionTimeout, held: make(map[*partition]struct{}),
		}, sub.matches)
	}
	return nil
}

// memberKey names a member of a group.
type memberKey struct{ group, id string }

// heldTopics is, per member, the topics of the partitions the snapshot
// says it holds (owned, or being revoked from it) or is being handed.
func heldTopics(snap Snapshot) map[memberKey]map[string]bool {
	out := make(map[memberKey]map[string]bool)
	note := func(g, id, topic string) {
		k := memberKey{g, id}
		if out[k] == nil {
			out[k] = make(map[string]bool)
		}
		out[k][topic] = true
	}
	for _, r := range snap.Partitions {
		if r.Holder != "" && !r.HolderOutside && r.State != Unowned {
			note(r.Group, r.Holder, r.Topic)
		}
		if r.Target != "" && !r.TargetOutside && r.State == Revoking {
			note(r.Group, r.Target, r.Topic)
		}
	}
	return out
}

// keptTopics is topics that the machine knows, sorted.
func (m *Machine) keptTopics(topics map[string]bool) []string {
	var out []string
	for t := range topics {
		if m.topics[t] > 0 {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// restorePatternBudget: a restore matches each tenant's distinct pattern
// texts within this many times limits.topic_pattern_steps in all. A
// restore runs before the coordinator serves anyone (a takeover, a
// restart), and it matched each distinct text within the bound: a
// tenant holding P texts cost every tenant's takeover P × the bound
// (limits.topic_patterns_per_tenant bounds P at joins; a restore takes
// what the store holds).
const restorePatternBudget = 4

// restoreMatch matches pattern, one of tenant's, against every topic at a
// restore, within limits.topic_pattern_steps and what budget leaves the
// tenant (absent: restorePatternBudget × the bound), which it spends.
func (m *Machine) restoreMatch(pattern *topicpattern.Matcher, tenant string, budget map[string]int) patternHits {
	left, ok := budget[tenant]
	if !ok {
		left = restorePatternBudget * m.cfg.Limits.TopicPatternSteps
	}
	_, names := m.topicNames.snapshot()
	if left <= 0 && len(names) > 0 {
		return patternHits{over: true} // spent: not one step more
	}
	topics, steps, over := matchBounded(pattern, names, min(left, m.cfg.Limits.TopicPatternSteps))
	m.patternSteps += int64(steps)
	budget[tenant] = max(left-steps, 0)
	return patternHits{topics: topics, over: over}
}

// joinedWrapped reports whether pattern compiled as a join's before
// topicpattern.Parse: wrapped as text, "^(?:"+pattern+")$".
func joinedWrapped(pattern string) bool {
	_, err := syntax.Parse("^(?:"+pattern+")$", syntax.Perl)
	return pattern != "" && err == nil
}

func (m *Machine) restorePartitions(snap Snapshot) error {
	for _, r := range snap.Partitions {
		g := m.group(r.Group)
		p := g.partition(assign.Partition{Topic: r.Topic, Partition: r.Partition})
		p.epoch = r.Epoch
		// Renew at the next heartbeat; bound what was issued before.
		if err := p.restoreOwnership(r, m.now, m.now.Add(m.cfg.MaxLease)); err != nil {
			return err
		}
		m.audit.restored(p)
		c, epoch := p.outstanding()
		if c == nil {
			continue
		}
		mem := g.members[c.holder.id]
		if mem != nil && !c.holder.outside {
			mem.held[p] = struct{}{}
		}
		if rv := p.revocation(); rv != nil {
			rv.fenceSeq = m.log.seq
			m.handoffs.push(rv.fenceSeq, p)
			m.push(timer{at: rv.started.Add(g.cfg.HandoffTimeout), kind: timerHandoff, partition: p})
			m.push(timer{at: m.expiredAt(rv), kind: timerHandoff, partition: p})
			if mem != nil && !c.holder.outside {
				mem.news.revoke = append(mem.news.revoke, p.ref(epoch))
			}
		}
	}
	for _, r := range snap.Offsets {
		p := m.group(r.Group).partition(assign.Partition{Topic: r.Topic, Partition: r.Partition})
		p.setCommitted(r.Offset, r.Metadata, r.Epoch)
		m.audit.committed(p, r.Offset, true)
	}
	return nil
}

func (m *Machine) restoreLeases(leases []LeaseRecord) {
	for _, r := range leases {
		if !r.Until.After(m.now) {
			r.Deleted = true
			m.putRecord(recordKey{kind: keyLease, first: r.Group, other: r.Topic, number: r.Partition}, r)
			continue
		}
		g := m.group(r.Group)
		p := g.partition(assign.Partition{Topic: r.Topic, Partition: r.Partition})
		p.lease = &lease{holder: r.Holder, outside: r.Outside, until: r.Until}
		g.leased[p.id] = p
		m.push(timer{at: r.Until, kind: timerLease, partition: p})
	}
}

func (m *Machine) restoreSyncState(snap Snapshot) {
	for _, d := range snap.Denied {
		if m.expiresEverywhere(d.Exp).After(m.now) {
			m.revocations.Deny(d.JTI, d.Exp)
			m.push(timer{at: m.expiresEverywhere(d.Exp), kind: timerPrune, prune: pruneRevocations})
		}
	}
	for _, r := range snap.RevokedMembers {
		if m.expiresEverywhere(r.Until).After(m.now) {
			m.revocations.RevokeMember(revocation.MemberKey{Group: r.Group, Member: r.MemberID}, r.Until)
			m.push(timer{at: m.expiresEverywhere(r.Until), kind: timerPrune, prune: pruneRevocations})
		}
	}
	for _, o := range snap.QoS {
		if time.Unix(o.Until, 0).After(m.now) {
			m.qos[o.ID] = o
			m.push(timer{at: time.Unix(o.Until, 0), kind: timerPrune, prune: pruneQoS, key: o.ID})
		}
	}
	for _, id := range snap.Gateways {
		gw := &gateway{id: id, lastSeen: m.now}
		m.gateways[id] = gw
		m.armSilence(gw)
	}
}
