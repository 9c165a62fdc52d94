package group

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/assign"
)

// audit records what the machine promised, independently of its working
// state, so the safety rules can be checked on every step: epochs only
// rise, each epoch is granted to one holder, grants wait for gateway safety
// and the old holder, committed offsets never move back, and nothing is
// sent about an epoch before it is persisted.
type audit struct {
	err          error // first violation
	persistedSeq uint64
}

// partitionAudit is the audit's own view of one partition.
type partitionAudit struct {
	maxEpoch    uint64 // highest epoch fenced or granted
	persisted   uint64 // highest epoch handed out in Persist
	grantEpoch  uint64 // epoch of the last grant
	grantHolder string
	grantOut    bool
	committed   int64
}

func (a *audit) fail(format string, args ...any) {
	if a.err == nil {
		a.err = fmt.Errorf("group: invariant: "+format, args...)
	}
}

func (a *audit) epochIssued(p *partition) {
	if p.epoch <= p.audit.maxEpoch {
		a.fail("epoch of %s did not rise above %d", p.describe(), p.audit.maxEpoch)
	}
	p.audit.maxEpoch = p.epoch
}

func (a *audit) granted(p *partition, g Grant) {
	if g.Epoch <= p.audit.grantEpoch || g.Epoch != p.audit.maxEpoch {
		a.fail("grant of %s at epoch %d after a grant at %d (max %d)", p.describe(), g.Epoch, p.audit.grantEpoch, p.audit.maxEpoch)
	}
	p.audit.grantEpoch, p.audit.grantHolder, p.audit.grantOut = g.Epoch, g.Holder, g.Outside
}

func (a *audit) renewed(p *partition, g Grant) {
	if g.Epoch != p.audit.grantEpoch || g.Holder != p.audit.grantHolder || g.Outside != p.audit.grantOut {
		a.fail("renewal of %s for %q at %d, but epoch %d was granted to %q", p.describe(), g.Holder, g.Epoch, p.audit.grantEpoch, p.audit.grantHolder)
	}
}

func (a *audit) committed(p *partition, offset int64, reset bool) {
	if !reset && offset < p.audit.committed {
		a.fail("committed offset of %s moved back from %d to %d", p.describe(), p.audit.committed, offset)
	}
	p.audit.committed = offset
}

func (a *audit) restored(p *partition) {
	p.audit = partitionAudit{maxEpoch: p.epoch, persisted: p.epoch, committed: -1}
	if c, epoch := p.outstanding(); c != nil {
		p.audit.grantEpoch, p.audit.grantHolder, p.audit.grantOut = epoch, c.holder.id, c.holder.outside
	}
}

// checkGatewaysSafe recomputes gateway safety for p's fence from scratch.
func (a *audit) checkGatewaysSafe(m *Machine, p *partition, r *revoking) {
	if m.holderExpired(r) {
		return
	}
	if m.safeByLag(r.fenceSeq) {
		return
	}
	if m.lagBound() {
		a.fail("%s marked safe at fence seq %d (appended %s ago) while a gateway forgotten for lagging holds every fence to gateway_timeout",
			p.describe(), r.fenceSeq, m.now.Sub(m.log.appendedAt(r.fenceSeq, m.now)))
	}
	for _, gw := range m.gateways {
		if gw.acked < r.fenceSeq && !m.safeBySilence(gw) {
			a.fail("%s marked safe but gateway %q acked %d < fence seq %d (appended %s ago) and was seen %s ago",
				p.describe(), gw.id, gw.acked, r.fenceSeq, m.now.Sub(m.log.appendedAt(r.fenceSeq, m.now)), m.now.Sub(gw.lastSeen))
		}
	}
}

// checkHandoff checks a handoff about to complete.
func (a *audit) checkHandoff(m *Machine, p *partition, r *revoking) {
	if !r.gatewaysSafe || !m.holderDone(p, r) || p.epoch <= r.fromEpoch {
		a.fail("handoff of %s completing early", p.describe())
	}
}

// checkReady checks a Ready before it leaves: persisted epochs and seq
// never fall, and every epoch and seq a message mentions is persisted.
func (a *audit) checkReady(m *Machine, r Ready) {
	for _, rec := range r.Persist {
		switch rec := rec.(type) {
		case PartitionRecord:
			p := m.auditPartition(rec.Group, rec.Topic, rec.Partition)
			if p == nil {
				continue
			}
			if rec.Epoch < p.audit.persisted {
				a.fail("persisted epoch of %s fell from %d to %d", p.describe(), p.audit.persisted, rec.Epoch)
			}
			p.audit.persisted = rec.Epoch
		case SyncSeqRecord:
			if rec.Seq < a.persistedSeq {
				a.fail("persisted sync seq fell from %d to %d", a.persistedSeq, rec.Seq)
			}
			a.persistedSeq = rec.Seq
		}
	}
	checked := make(map[fenceList]bool)
	for _, msg := range r.Messages {
		a.checkMessage(m, msg, checked)
	}
}

// fenceList names a list of fences by its first element and length: the
// sync replies of one Ready share one delta's (answerParkedPolls), which
// checkMessage checks once (16 gateways: 16 × 10,000 lookups for a
// member's bulk revoke, in the loop before the persist).
type fenceList struct {
	first *api.Fence
	n     int
}

// checkMessage checks the epochs msg mentions; checked is the fence
// lists of this Ready checked already.
func (a *audit) checkMessage(m *Machine, msg Message, checked map[fenceList]bool) {
	epoch := func(group, topic string, number int32, e uint64) {
		if p := m.auditPartition(group, topic, number); p == nil || e > p.audit.persisted {
			a.fail("message %T mentions epoch %d of %s/%s/%d before it was persisted", msg, e, group, topic, number)
		}
	}
	grants := func(gs []Grant) {
		for _, g := range gs {
			epoch(g.Group, g.Topic, g.Partition, g.Epoch)
		}
	}
	switch msg := msg.(type) {
	case JoinReply:
		grants(msg.Grants)
	case News:
		grants(msg.Grants)
		grants(msg.Renew)
		for _, r := range msg.Revoke {
			epoch(msg.Group, r.Topic, r.Partition, r.Epoch)
		}
	case LeaseReply:
		grants([]Grant{msg.Grant})
	case SyncReply:
		if msg.Seq > a.persistedSeq {
			a.fail("sync reply at seq %d before seq %d was persisted", msg.Seq, a.persistedSeq)
		}
		if len(msg.Fences) == 0 {
			return
		}
		list := fenceList{&msg.Fences[0], len(msg.Fences)}
		if checked[list] {
			return
		}
		checked[list] = true
		for _, f := range msg.Fences {
			epoch(f.Group, f.Topic, f.Partition, f.Epoch)
		}
	}
}

func (m *Machine) auditPartition(groupName, topic string, number int32) *partition {
	if g := m.groups[groupName]; g != nil {
		return g.parts[assign.Partition{Topic: topic, Partition: number}]
	}
	return nil
}

// CheckInvariants checks the whole state (O(state); for tests and debug
// builds) and returns the first safety violation seen so far, if any.
func (m *Machine) CheckInvariants() error {
	if m.audit.err != nil {
		return m.audit.err
	}
	var errs []error
	for _, name := range sortedKeys(m.groups) {
		errs = append(errs, m.checkGroup(m.groups[name])...)
	}
	if names := sortedKeys(m.groups); !slices.Equal(names, m.names) {
		errs = append(errs, fmt.Errorf("sorted group names index of %d names, %d groups", len(m.names), len(names)))
	}
	errs = append(errs, m.checkTally()...)
	errs = append(errs, m.checkCreators()...)
	if m.log.n > m.log.max || m.log.first() < 1 {
		errs = append(errs, fmt.Errorf("sync log holds %d entries (max %d) from %d", m.log.n, m.log.max, m.log.first()))
	}
	for _, gw := range m.gateways {
		if gw.acked > m.log.seq || (!gw.silenceArmed && !m.silent(gw)) || (gw.wait.held && !gw.wait.armed) {
			errs = append(errs, fmt.Errorf("gateway %q: acked %d of %d, silence timer %t, held %t, wait timer %t",
				gw.id, gw.acked, m.log.seq, gw.silenceArmed, gw.wait.held, gw.wait.armed))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("group: invariant: %w", err)
	}
	return nil
}

// checkCreators: each tenant's count of the groups it created is the
// groups that still exist (not deleted) naming it their creator.
func (m *Machine) checkCreators() []error {
	var errs []error
	want := make(map[string]int)
	for _, g := range m.groups {
		switch {
		case g.creator != "" && g.deleted:
			errs = append(errs, fmt.Errorf("deleted group %q keeps its creator %q", g.name, g.creator))
		case g.creator != "":
			want[g.creator]++
			if _, ok := m.created[g.creator][g]; !ok {
				errs = append(errs, fmt.Errorf("group %q is missing from its creator %q's", g.name, g.creator))
			}
		}
	}
	got := make(map[string]int, len(m.created))
	for tenant, gs := range m.created {
		got[tenant] = len(gs)
	}
	if !maps.Equal(want, got) {
		errs = append(errs, fmt.Errorf("groups created per tenant %v, want %v", got, want))
	}
	return errs
}

func (m *Machine) checkGroup(g *group) []error {
	var errs []error
	subscribed := make(map[string]int)
	for id, mem := range g.members {
		if mem.id != id || mem.removed || (mem.instanceID != "" && g.instances[mem.instanceID] != mem) {
			errs = append(errs, fmt.Errorf("member %q of %q is inconsistent", id, g.name))
		}
		if !mem.sessionArmed && !mem.wait.held || mem.wait.held && !mem.wait.armed {
			errs = append(errs, fmt.Errorf("member %q of %q has no timer armed", id, g.name))
		}
		for p := range mem.held {
			if !p.heldBy(mem.id) {
				errs = append(errs, fmt.Errorf("member %q holds %s", id, p.describe()))
			}
		}
		for t := range mem.resolved {
			subscribed[t]++
		}
	}
	if len(subscribed) != len(g.subscribed) {
		errs = append(errs, fmt.Errorf("group %q subscription counts %v, want %v", g.name, g.subscribed, subscribed))
	}
	if w := g.window; w.open && (!w.armed || w.quietUntil.After(w.closesBy) || w.answerBy.After(w.closesBy)) {
		errs = append(errs, fmt.Errorf("group %q: join window open with timer armed %t, quiet until %s, opener answered by %s, closing by %s", g.name, w.armed, w.quietUntil, w.answerBy, w.closesBy))
	}
	for t, n := range subscribed {
		if g.subscribed[t] != n {
			errs = append(errs, fmt.Errorf("group %q subscription counts %v, want %v", g.name, g.subscribed, subscribed))
		}
	}
	for i, p := range g.order {
		if i > 0 && !g.order[i-1].id.Less(p.id) || g.parts[p.id] != p {
			errs = append(errs, fmt.Errorf("partition order of %q broken at %s", g.name, p.describe()))
		}
		if err := m.checkPartition(g, p); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// checkPartition checks one partition: at most one holder of a capability
// at the current epoch, epochs as audited, offsets as audited.
func (m *Machine) checkPartition(g *group, p *partition) error {
	a := p.audit
	switch {
	case p.epoch != a.maxEpoch:
		return fmt.Errorf("%s: epoch differs from the highest issued %d", p.describe(), a.maxEpoch)
	case p.committed != a.committed:
		return fmt.Errorf("%s: committed %d, audited %d", p.describe(), p.committed, a.committed)
	}
	switch s := p.own.(type) {
	case unowned:
		if p.epoch > 0 && a.grantEpoch >= p.epoch {
			return fmt.Errorf("%s: unowned but epoch %d was granted", p.describe(), a.grantEpoch)
		}
	case *owned:
		h := s.cap.holder
		if a.grantEpoch != p.epoch || a.grantHolder != h.id || a.grantOut != h.outside {
			return fmt.Errorf("%s: owner differs from the audited grant %q@%d", p.describe(), a.grantHolder, a.grantEpoch)
		}
		if !h.outside && !g.isMember(h.id) {
			return fmt.Errorf("%s: owned by a non-member", p.describe())
		}
		if !h.outside {
			if _, ok := g.members[h.id].held[p]; !ok {
				return fmt.Errorf("%s: missing from its holder's partitions", p.describe())
			}
		}
	case *revoking:
		if p.epoch <= s.fromEpoch || a.grantEpoch >= p.epoch || s.fenceSeq > m.log.seq {
			return fmt.Errorf("%s: revoking but epoch %d not above the holder's %d (last grant %d)", p.describe(), p.epoch, s.fromEpoch, a.grantEpoch)
		}
		if !s.to.none() && !s.to.outside && !g.isMember(s.to.id) {
			return fmt.Errorf("%s: revoking to a non-member", p.describe())
		}
	default:
		return fmt.Errorf("%s: unknown state", p.describe())
	}
	return nil
}

// checkTally recomputes the state estimate, the credentials' members and
// the tenants' live members per group from scratch.
func (m *Machine) checkTally() []error {
	var want tally
	var errs []error
	members, held, memberBytes := map[string]int{}, map[string]int{}, map[string]int64{}
	tenants := map[string]map[*group]int{}
	indexed := map[memberName]memberTenant{}
	for _, g := range m.groups {
		want.groups++
		want.partitions += int64(len(g.parts))
		var metadata int64
		for _, p := range g.parts {
			metadata += metadataCost(p.metadata)
		}
		want.metadataBytes += metadata
		if metadata != g.metadataBytes {
			errs = append(errs, fmt.Errorf("group %q's metadata bytes %d, recomputed %d", g.name, g.metadataBytes, metadata))
		}
		for _, mem := range g.members {
			want.memberBytes += memberCost(mem)
			memberBytes[mem.credential.tenant()] += memberCost(mem)
			members[mem.credential.ID]++
			if c := m.credentials[mem.credential.ID]; c == nil {
				errs = append(errs, fmt.Errorf("member %q of %q is missing from its credential", mem.id, g.name))
			} else if _, ok := c.members[mem]; !ok {
				errs = append(errs, fmt.Errorf("member %q of %q is missing from its credential", mem.id, g.name))
			}
			if tenants[mem.credential.tenant()] == nil {
				tenants[mem.credential.tenant()] = map[*group]int{}
			}
			tenants[mem.credential.tenant()][g]++
			indexed[memberName{g.name, mem.id}] = memberTenant{mem.credential.tenant(), mem.credential.ID}
			if mem.wait.held {
				held[mem.credential.tenant()]++
			}
		}
	}
	errs = append(errs, m.checkTenantGroups(tenants)...)
	errs = append(errs, m.checkLivePatterns()...)
	m.memberTenants.mu.RLock()
	if !maps.Equal(indexed, m.memberTenants.m) {
		errs = append(errs, fmt.Errorf("member tenants index of %d members, recomputed %d", len(m.memberTenants.m), len(indexed)))
	}
	m.memberTenants.mu.RUnlock()
	if !maps.Equal(held, m.heldHeartbeats) {
		errs = append(errs, fmt.Errorf("held heartbeats per tenant %v, recomputed %v", m.heldHeartbeats, held))
	}
	if !maps.Equal(memberBytes, m.memberBytes) {
		errs = append(errs, fmt.Errorf("member bytes per tenant %v, recomputed %v", m.memberBytes, memberBytes))
	}
	if want != m.tally {
		errs = append(errs, fmt.Errorf("state tally %+v, recomputed %+v", m.tally, want))
	}
	for id, c := range m.credentials {
		if len(c.members) != members[id] {
			errs = append(errs, fmt.Errorf("credential %q lists %d members, %d are live", id, len(c.members), members[id]))
		}
	}
	return errs
}

// checkLivePatterns compares the live patterns index (livepatterns.go)
// with the live members' patterns.
func (m *Machine) checkLivePatterns() []error {
	type counts struct{ members, fresh int }
	want := map[tenantPattern]counts{}
	for _, g := range m.groups {
		for _, mem := range g.members {
			if mem.pattern == nil {
				continue
			}
			if mem.patternUnrestored && (!mem.patternStale || len(mem.resolved) > 0) {
				return []error{fmt.Errorf("member %q of %q: unrestored but stale %v with topics %v", mem.id, g.name, mem.patternStale, mem.resolved)}
			}
			k := tenantPattern{tenant: mem.credential.tenant(), text: mem.patternText}
			c := want[k]
			c.members++
			if !mem.patternStale {
				c.fresh++
			}
			want[k] = c
		}
	}
	got := map[tenantPattern]counts{}
	m.livePatterns.mu.RLock()
	for tenant, texts := range m.livePatterns.tenants {
		for text, p := range texts {
			got[tenantPattern{tenant: tenant, text: text}] = counts{p.members, p.fresh}
		}
	}
	m.livePatterns.mu.RUnlock()
	if !maps.Equal(got, want) {
		return []error{fmt.Errorf("live patterns index %v, recomputed %v", got, want)}
	}
	return nil
}

// checkTenantGroups compares Machine.tenantGroups with want, the tenants'
// live members per group counted from the groups.
func (m *Machine) checkTenantGroups(want map[string]map[*group]int) []error {
	var errs []error
	for tenant, groups := range m.tenantGroups {
		for g, n := range groups {
			if want[tenant][g] != n {
				errs = append(errs, fmt.Errorf("tenant %q counts %d members in %q, %d are live", tenant, n, g.name, want[tenant][g]))
			}
		}
	}
	for tenant, groups := range want {
		if len(m.tenantGroups[tenant]) != len(groups) {
			errs = append(errs, fmt.Errorf("tenant %q counts members in %d groups, they are in %d", tenant, len(m.tenantGroups[tenant]), len(groups)))
		}
	}
	return errs
}
