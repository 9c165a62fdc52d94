package group

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/revocation"
)

// adminPartition finds a partition named by an admin request in an
// existing group, adding it to the group if the topic has it; it rejects
// (404 for an unknown group or partition) and returns nil otherwise. An
// admin action never creates a group: only joins and SetGroupConfig do.
func (m *Machine) adminPartition(ref Ref, groupName, topic string, number int32) *partition {
	if groupName == "" || topic == "" || number < 0 {
		m.reject(ref, api.CodeBadRequest, "group, topic and a partition >= 0 required")
		return nil
	}
	g := m.groupNamed(groupName)
	if g == nil {
		m.reject(ref, api.CodeNotFound, "unknown group %q", groupName)
		return nil
	}
	id := assign.Partition{Topic: topic, Partition: number}
	if p := g.parts[id]; p != nil {
		return p
	}
	if number >= m.topics[topic] {
		m.reject(ref, api.CodeNotFound, "unknown partition %s/%d", topic, number)
		return nil
	}
	return g.partition(id)
}

func (m *Machine) revokePartition(e RevokePartition) {
	p := m.adminPartition(e.Ref, e.Group, e.Topic, e.Partition)
	if p == nil {
		return
	}
	if p.lease != nil && p.lease.outside {
		m.endLease(p)
	}
	switch s := p.own.(type) {
	case unowned:
		m.send(RevokeReply{Ref: e.Ref, Group: e.Group, Topic: e.Topic, Partition: e.Partition, Epoch: p.epoch})
		return
	case *revoking:
		if s.gatewaysSafe {
			m.send(RevokeReply{Ref: e.Ref, Group: e.Group, Topic: e.Topic, Partition: e.Partition, Epoch: p.epoch})
			return
		}
	case *owned:
		s.force = max(s.force, forceRevoke)
	}
	p.revokeWaiters = append(p.revokeWaiters, e.Ref)
	m.queueReassign(p.group)
}

func (m *Machine) leasePartition(e Lease) {
	if e.Holder == "" || e.TTL <= 0 {
		m.reject(e.Ref, api.CodeBadRequest, "lease: holder and ttl > 0 required")
		return
	}
	if limit := m.cfg.Limits.LeaseTTLMax; e.TTL > limit {
		m.reject(e.Ref, api.CodeBadRequest, "lease: %v", durationMaxError("ttl", e.TTL, limit, "groups.limits.lease_ttl_max"))
		return
	}
	p := m.adminPartition(e.Ref, e.Group, e.Topic, e.Partition)
	if p == nil {
		return
	}
	g := p.group
	mem := g.members[e.Holder]
	if mem != nil && !mem.resolved[e.Topic] {
		m.reject(e.Ref, api.CodeConflict, "lease: member %q does not subscribe to %q", e.Holder, e.Topic)
		return
	}
	if l := p.lease; l != nil && l.holder != e.Holder && !e.Force {
		// Moving a lease fences its holder's capability: as an offsets
		// reset of a leased partition, only when asked for. Before, a
		// second lease silently took the partition from the first
		// holder, whose lease said nobody else would be granted it.
		m.rejectWith(e.Ref, map[string]any{"lease": leaseDetail(l)}, api.CodeConflict,
			"lease: %s/%d of group %q is leased to %q until %s: lease with force to move it (its holder's capability is fenced), or revoke the partition first (the lease ends)",
			e.Topic, e.Partition, e.Group, l.holder, l.until.UTC().Format(time.RFC3339))
		return
	}
	until := m.now.Add(e.TTL)
	if p.leaseWaiter != 0 {
		m.reject(p.leaseWaiter, api.CodeConflict, "lease superseded")
	}
	p.lease = &lease{holder: e.Holder, outside: mem == nil, until: until}
	p.leaseWaiter = e.Ref
	g.leased[p.id] = p
	m.putRecord(leaseKey(p), LeaseRecord{Group: g.name, Topic: e.Topic, Partition: e.Partition,
		Holder: e.Holder, Outside: mem == nil, Until: until})
	m.push(timer{at: until, kind: timerLease, partition: p})
	if o := p.owner(); o != nil && o.cap.holder == (holder{id: e.Holder, outside: mem == nil}) {
		m.extendLeaseHolder(p, o)
		return
	}
	m.queueReassign(g)
}

// extendLeaseHolder answers a lease to the current holder with its grant,
// renewed to the new lease end for an outside holder.
func (m *Machine) extendLeaseHolder(p *partition, o *owned) {
	if o.cap.holder.outside {
		o.cap.renew(m.outsideExpiry(p))
	} else {
		m.extend(p)
	}
	g := m.grantOf(p)
	m.audit.renewed(p, g)
	o.cap.sent = true
	m.send(LeaseReply{Ref: p.leaseWaiter, Grant: g, Until: p.lease.until})
	p.leaseWaiter = 0
}

// leaseDetail is lease l in a 409's details: its holder and end.
func leaseDetail(l *lease) map[string]any {
	return map[string]any{"holder": l.holder, "until": l.until.UTC().Format("2006-01-02T15:04:05.000Z07:00")}
}

func leaseKey(p *partition) recordKey {
	return recordKey{kind: keyLease, first: p.group.name, other: p.id.Topic, number: p.id.Partition}
}

func (m *Machine) onLeaseTimer(p *partition) {
	if p.lease != nil && !m.now.Before(p.lease.until) {
		m.endLease(p)
	}
}

// endLease unpins p; the assignment takes it back.
func (m *Machine) endLease(p *partition) {
	l := p.lease
	p.lease = nil
	delete(p.group.leased, p.id)
	m.putRecord(leaseKey(p), LeaseRecord{Group: p.group.name, Topic: p.id.Topic, Partition: p.id.Partition,
		Holder: l.holder, Outside: l.outside, Until: l.until, Deleted: true})
	if p.leaseWaiter != 0 {
		m.reject(p.leaseWaiter, api.CodeConflict, "lease ended before it was granted")
		p.leaseWaiter = 0
	}
	m.queueReassign(p.group)
}

// expiresEverywhere is when an entry with time t (a token's exp, unix
// seconds) has lapsed at every verifier — the one rule of package
// revocation, exp + leeway + max_clock_skew — and the machine may drop
// it: that plus groups.renew_token_grace (Rule.Kept), so a renewal
// taken that far past its member token's expiry is checked against
// every entry that held when the token was last good, after a restart
// or a takeover too.
func (m *Machine) expiresEverywhere(t int64) time.Time {
	return m.revocations.Rule().Kept(t)
}

// deny denies every id of ds, or none of them (admitDenials), then
// revokes the members each opened. An exp past now + TokenTTLMax is
// capped there: no token the id can match lives longer (the shell
// refuses such an exp from an operator with 400; this bounds every
// other path too).
func (m *Machine) deny(ref Ref, ds []Denial) {
	exps := make([]int64, len(ds))
	bound := m.now.Add(m.cfg.TokenTTLMax)
	for i, d := range ds {
		if d.JTI == "" {
			m.reject(ref, api.CodeBadRequest, "deny: jti required")
			return
		}
		expires := d.Expires
		if expires.After(bound) {
			expires = bound
		}
		exps[i] = expires.Unix()
		if expires.After(time.Unix(exps[i], 0)) {
			exps[i]++ // round up: deny at least until the token's exp
		}
	}
	if !m.admitDenials(ref, ds, exps) {
		return
	}
	for i, d := range ds {
		exp := exps[i]
		if old, _ := m.revocations.DenyExp(d.JTI); m.expiresEverywhere(exp).After(m.now) && exp > old {
			denied := api.Denied{JTI: d.JTI, Exp: exp}
			m.revocations.Deny(d.JTI, exp)
			m.appendEntry(syncEntry{kind: entryDenied, denied: denied})
			m.putRecord(recordKey{kind: keyDenied, first: d.JTI}, DeniedRecord{Denied: denied})
			m.push(timer{at: m.expiresEverywhere(exp), kind: timerPrune, prune: pruneRevocations})
		}
	}
	for _, d := range ds {
		m.revokeOpenedBy(d.JTI)
	}
	m.send(Done{Ref: ref})
}

// revokeOpenedBy revokes every live member the credential id opened, in
// group and member order.
func (m *Machine) revokeOpenedBy(credential string) {
	var opened []*member
	if c := m.credentials[credential]; c != nil {
		for mem := range c.members {
			opened = append(opened, mem)
		}
	}
	slices.SortFunc(opened, func(a, b *member) int {
		return cmp.Or(strings.Compare(a.group.name, b.group.name), strings.Compare(a.id, b.id))
	})
	for _, mem := range opened {
		m.revokeLiveMember(mem)
	}
}

// revokeMember answers an unknown group 404 not_found, as every admin
// route naming a group does. A member whose revocation still runs (an
// administrator's, a forced delete's or its credential's deny) is
// answered as revoked, AlreadyRevoked and nothing done: a repeat of a
// revoke whose answer was lost — a timeout, a 503 saying it may have
// been applied, a leader killed before it answered — finds what it asked
// for, not an error. Any other member its group does not hold (never
// joined, left, expired, or revoked longer ago than its revocation
// runs) is 409 unknown_member.
func (m *Machine) revokeMember(e RevokeMember) {
	if m.groupNamed(e.Group) == nil {
		m.reject(e.Ref, api.CodeNotFound, "unknown group %q", e.Group)
		return
	}
	mem := m.memberOf(e.Group, e.MemberID)
	if mem == nil {
		key := revocation.MemberKey{Group: e.Group, Member: e.MemberID}
		if until, ok := m.revocations.RevokedUntil(key); ok && m.revocations.RevokedAt(key, m.now) { // a lapsed one may be kept (Rule.Retain)
			m.send(RevokeMemberReply{Ref: e.Ref, Until: time.Unix(until, 0).UTC(), AlreadyRevoked: true})
			return
		}
		m.reject(e.Ref, api.CodeUnknownMember, "revoke: group %q has no member %q (never joined, left, expired, or its revocation — at least capability_lease — ended)", e.Group, e.MemberID)
		return
	}
	fenced := len(mem.held)
	until := m.revokeLiveMember(mem)
	m.send(RevokeMemberReply{Ref: e.Ref, Until: until, Fenced: fenced})
}

// revokeLiveMember denies mem's capabilities on the gateways until every
// one it may hold has expired, and removes it (its partitions are fenced
// and reassigned). It returns the end of the revocation: never sooner
// than capability_lease from now, so that the revocation — kept as long
// as it runs, and no longer — answers a repeated revoke for at least
// that long (revokeMember) even for a member that held nothing; a member
// holding a partition is revoked about that long anyway.
func (m *Machine) revokeLiveMember(mem *member) time.Time {
	until := m.now.Add(m.cfg.CapabilityLease)
	for p := range mem.held {
		if c, _ := p.outstanding(); c.bound.After(until) {
			until = c.bound
		}
	}
	exp := until.Unix()
	if until.After(time.Unix(exp, 0)) {
		exp++
	}
	r := api.RevokedMember{Group: mem.group.name, MemberID: mem.id, Until: exp}
	m.revocations.RevokeMember(revocation.MemberKey{Group: r.Group, Member: r.MemberID}, exp)
	m.appendEntry(syncEntry{kind: entryRevoked, revoked: r})
	m.putRecord(recordKey{kind: keyRevoked, first: r.Group, other: r.MemberID}, RevokedMemberRecord{RevokedMember: r})
	m.push(timer{at: m.expiresEverywhere(exp), kind: timerPrune, prune: pruneRevocations})
	mem.revoked = true
	m.removeMember(mem)
	return time.Unix(exp, 0).UTC()
}

func (m *Machine) putQoS(e PutQoS) {
	o := e.Override
	s := o.Selector
	if o.ID == "" || (s.Group == "" && s.Topic == "" && s.Partition == nil && s.Holder == "" && s.JTI == "") {
		m.reject(e.Ref, api.CodeBadRequest, "qos: id and a selector required")
		return
	}
	if o.MaxBytesPerSec < 0 {
		m.reject(e.Ref, api.CodeBadRequest, "qos: max_bytes_per_sec must be >= 0, got %d", o.MaxBytesPerSec)
		return
	}
	if limit := m.cfg.Limits.QoSTTLMax; time.Unix(o.Until, 0).Sub(m.now) > limit {
		m.reject(e.Ref, api.CodeBadRequest, "qos: until %s is further away than groups.limits.qos_ttl_max (%s)", time.Unix(o.Until, 0).UTC().Format(time.RFC3339), limit)
		return
	}
	if !m.admitQoS(e) {
		return
	}
	if old, ok := m.qos[o.ID]; ok {
		o = e.Keep.merge(old, o)
	}
	m.appendEntry(syncEntry{kind: entryQoS, qos: &o})
	if time.Unix(o.Until, 0).After(m.now) {
		m.qos[o.ID] = o
		m.putRecord(recordKey{kind: keyQoS, first: o.ID}, QoSRecord{Override: o})
		m.push(timer{at: time.Unix(o.Until, 0), kind: timerPrune, prune: pruneQoS, key: o.ID})
	} else if _, ok := m.qos[o.ID]; ok {
		delete(m.qos, o.ID)
		m.putRecord(recordKey{kind: keyQoS, first: o.ID}, QoSRecord{Override: o, Deleted: true})
	}
	m.send(QoSReply{Ref: e.Ref, Override: o})
}

// onPruneTimer drops the revocation entries that lapsed, and a QoS
// override whose time came.
func (m *Machine) onPruneTimer(t timer) {
	if t.prune == pruneQoS {
		if o, ok := m.qos[t.key]; ok && !m.now.Before(time.Unix(o.Until, 0)) {
			delete(m.qos, t.key)
			m.putRecord(recordKey{kind: keyQoS, first: t.key}, QoSRecord{Override: o, Deleted: true})
		}
		return
	}
	denied, members := m.revocations.Prune(m.now)
	for _, d := range denied {
		m.putRecord(recordKey{kind: keyDenied, first: d.JTI}, DeniedRecord{Denied: d, Deleted: true})
	}
	for _, r := range members {
		m.putRecord(recordKey{kind: keyRevoked, first: r.Group, other: r.MemberID}, RevokedMemberRecord{RevokedMember: r, Deleted: true})
	}
}

func (m *Machine) setGroupConfig(e SetGroupConfig) {
	if e.Group == "" {
		m.reject(e.Ref, api.CodeBadRequest, "group required")
		return
	}
	cfg := m.cfg.groupDefaults()
	g := m.groups[e.Group]
	if g != nil {
		cfg = g.cfg
	}
	next := cfg
	setIf(&next.Assignor, e.Assignor)
	setIf(&next.SessionTimeout, e.SessionTimeout)
	setIf(&next.HandoffTimeout, e.HandoffTimeout)
	setIf(&next.MaxMovesPerSecond, e.MaxMovesPerSecond)
	setIf(&next.OffsetReset, e.OffsetReset)
	if err := next.validate(m.cfg); err != nil {
		m.reject(e.Ref, api.CodeBadRequest, "group config: %v", err)
		return
	}
	if g != nil && next.Assignor != cfg.Assignor && len(g.members) > 0 {
		m.reject(e.Ref, api.CodeInconsistentAssign, "group config: group %q has members using %q", e.Group, cfg.Assignor)
		return
	}
	if !m.admitAdminGroup(e.Ref, e.Group) {
		return
	}
	g = m.group(e.Group)
	g.cfg = next
	m.putGroup(g)
	if next.HandoffTimeout != cfg.HandoffTimeout {
		for _, p := range g.order {
			if r := p.revocation(); r != nil {
				m.push(timer{at: r.started.Add(next.HandoffTimeout), kind: timerHandoff, partition: p})
				m.tryComplete(p)
			}
		}
	}
	if next.MaxMovesPerSecond != cfg.MaxMovesPerSecond {
		g.nextMoveAt = m.now
		m.startPendingMoves(g)
	}
	m.send(GroupConfigReply{Ref: e.Ref, Config: next})
}

func setIf[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

func (m *Machine) resetOffset(e ResetOffset) {
	if e.Offset < 0 {
		m.reject(e.Ref, api.CodeBadRequest, "reset: offset must be >= 0, got %d", e.Offset)
		return
	}
	p := m.adminPartition(e.Ref, e.Group, e.Topic, e.Partition)
	if p == nil {
		return
	}
	reply := ResetOffsetReply{Ref: e.Ref}
	if l := p.lease; l != nil && l.outside {
		if !e.Force {
			m.send(Rejected{Ref: e.Ref, Code: api.CodeConflict, Message: fmt.Sprintf("%s/%d of group %q is leased to %q, outside the group, until %s: "+
				"a reset fences its capability and ends the lease. Revoke the partition first (the lease ends), or reset with force to end it",
				e.Topic, e.Partition, e.Group, l.holder, l.until.UTC().Format(time.RFC3339)),
				Details: map[string]any{"lease": leaseDetail(l)}})
			return
		}
		reply.LeaseEnded = &EndedLease{Holder: l.holder, Until: l.until}
		m.endLease(p)
	}
	m.audit.committed(p, e.Offset, true)
	p.setCommitted(e.Offset, e.Metadata, 0)
	m.markOffset(p)
	switch s := p.own.(type) {
	case *owned:
		s.force = forceReset
		m.queueReassign(p.group)
	case *revoking:
		s.forced = true
		m.markDirty(p)
		m.tryComplete(p)
	}
	m.send(reply)
}
