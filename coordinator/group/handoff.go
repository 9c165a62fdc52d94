package group

import "time"

// The handoff protocol of DESIGN §4, one partition at a time:
//
//	owned(A) --startMove--> revoking(A→B)  epoch e+1 persisted, fence e+1
//	                                       on the sync log, revoke{e} to A
//	revoking(A→B) --retarget--> revoking(A→C)   same epoch; back to A: e+2
//	revoking(A→B) --completeHandoff--> owned(B) at e+1, or unowned
//	    once every gateway is safe for the fence AND A released, A is
//	    gone, or handoff_timeout passed.
//	unowned --grantNow--> owned(B) at a fresh epoch, at once.

// startMove begins moving an owned partition to target ("" = nobody).
func (m *Machine) startMove(p *partition, target string, targetOutside bool) {
	if p.state != Owned {
		panic("group: startMove of a partition that is not owned: " + p.describe())
	}
	p.forced = p.force == forceReset
	p.force = forceNone
	p.state = Revoking
	p.target, p.targetOutside = target, targetOutside
	p.started = m.now
	p.released, p.givenUp = p.givenUp, false
	m.fence(p)
	mem := p.group.members[p.holder]
	if mem != nil && !p.holderOutside {
		mem.news.drop(p)
	}
	switch {
	case !p.grantSent:
		// The grant never left the machine: no capability exists at
		// holderEpoch, and older ones were fenced before it was made.
		p.released = true
		p.expiryBound = time.Time{}
	case mem != nil && !p.holderOutside:
		mem.news.revoke = append(mem.news.revoke, p.ref(p.holderEpoch))
		m.queueNews(mem)
	}
	m.push(timer{at: p.started.Add(p.group.cfg.HandoffTimeout), kind: timerHandoff, partition: p})
	m.push(timer{at: m.expiredAt(p), kind: timerHandoff, partition: p})
	m.tryComplete(p)
}

// fence raises the partition's epoch and puts the fence on the sync log.
func (m *Machine) fence(p *partition) {
	p.epoch++
	m.audit.epochIssued(p)
	p.gatewaysSafe = false
	p.fenceSeq = m.appendEntry(syncEntry{kind: entryFence, fence: p.fence()})
	m.handoffs.push(p.fenceSeq, p)
	m.markDirty(p)
}

// retarget changes where a revoking partition goes. Back to its holder it
// needs a fresh epoch and fence; anywhere else the pending epoch (never
// granted) and the progress so far stay.
func (m *Machine) retarget(p *partition, target string, targetOutside bool) {
	if p.target == target && p.targetOutside == targetOutside {
		return
	}
	p.target, p.targetOutside = target, targetOutside
	if target != "" && target == p.holder && targetOutside == p.holderOutside {
		m.fence(p)
	}
	m.markDirty(p)
	m.tryComplete(p)
}

// tryComplete finishes a handoff whose conditions hold. Safe to call at any
// time for any partition.
func (m *Machine) tryComplete(p *partition) {
	if p.state != Revoking {
		return
	}
	if !p.gatewaysSafe && (m.holderExpired(p) || p.fenceSeq <= m.gatewayWatermark()) {
		m.setGatewaysSafe(p)
	}
	if !p.gatewaysSafe || !m.holderDone(p) {
		return
	}
	if p.target != "" && !p.targetOutside && !p.group.isMember(p.target) {
		m.queueReassign(p.group) // the target left; reassignment retargets
		return
	}
	m.audit.checkHandoff(m, p)
	if mem := p.group.members[p.holder]; mem != nil && !p.holderOutside {
		delete(mem.held, p)
	}
	if p.target == "" {
		p.state = Unowned
		p.holder, p.holderOutside, p.holderEpoch = "", false, 0
		p.capExpiry, p.expiryBound = time.Time{}, time.Time{}
		p.released, p.forced, p.grantSent = false, false, false
		m.markDirty(p)
		return
	}
	m.grant(p, p.target, p.targetOutside)
}

func (m *Machine) setGatewaysSafe(p *partition) {
	m.audit.checkGatewaysSafe(m, p)
	p.gatewaysSafe = true
	for _, ref := range p.revokeWaiters {
		m.send(RevokeReply{Ref: ref, Group: p.group.name, Topic: p.id.Topic, Partition: p.id.Partition, Epoch: p.epoch})
	}
	p.revokeWaiters = nil
}

// holderExpired reports whether every capability of the revoked holder has
// expired everywhere: exp + leeway + max_clock_skew < now.
func (m *Machine) holderExpired(p *partition) bool {
	return m.now.After(p.expiryBound.Add(m.cfg.Leeway + m.cfg.MaxClockSkew))
}

// expiredAt is the first instant holderExpired is true.
func (m *Machine) expiredAt(p *partition) time.Time {
	return p.expiryBound.Add(m.cfg.Leeway + m.cfg.MaxClockSkew + 1)
}

// holderDone reports whether the revoked holder let go: released, gone,
// never able to commit, or out of time.
func (m *Machine) holderDone(p *partition) bool {
	return p.released || p.forced || p.holderOutside || p.holder == "" ||
		!p.group.isMember(p.holder) ||
		!m.now.Before(p.started.Add(p.group.cfg.HandoffTimeout))
}

// grantNow gives an unowned partition to holder under a fresh epoch.
func (m *Machine) grantNow(p *partition, holder string, outside bool) {
	p.epoch++
	m.audit.epochIssued(p)
	m.grant(p, holder, outside)
}

// grant makes holder the owner at p.epoch and tells it.
func (m *Machine) grant(p *partition, holder string, outside bool) {
	p.state = Owned
	p.holder, p.holderOutside, p.holderEpoch = holder, outside, p.epoch
	p.target, p.targetOutside = "", false
	p.released, p.forced, p.gatewaysSafe = false, false, false
	exp := m.expiry(m.cfg.CapabilityLease)
	if outside {
		exp = m.outsideExpiry(p)
	}
	p.capExpiry, p.expiryBound = exp, exp
	p.grantSent = false
	m.markDirty(p)
	g := m.grantOf(p)
	m.audit.granted(p, g)
	if !outside {
		mem := p.group.members[holder]
		mem.held[p] = struct{}{}
		mem.news.addGrant(p)
		m.queueNews(mem)
	}
	if p.leaseWaiter != 0 && p.lease != nil && p.lease.holder == holder {
		p.grantSent = true
		m.send(LeaseReply{Ref: p.leaseWaiter, Grant: g, Until: p.lease.until})
		p.leaseWaiter = 0
	}
}

// grantOf describes the holder's current capability.
func (m *Machine) grantOf(p *partition) Grant {
	offset := p.committed
	if offset < 0 {
		offset = p.group.cfg.resetOffset()
	}
	return Grant{
		Group: p.group.name, Holder: p.holder, Outside: p.holderOutside,
		Topic: p.id.Topic, Partition: p.id.Partition, Epoch: p.holderEpoch,
		Offset: offset, ExpiresAt: p.capExpiry,
	}
}

// outsideExpiry is an outside holder's capability expiry: the lease end,
// capped by max_lease.
func (m *Machine) outsideExpiry(p *partition) time.Time {
	exp := m.expiry(m.cfg.MaxLease)
	if p.lease != nil && p.lease.until.Before(exp) {
		exp = time.Unix(p.lease.until.Unix(), 0).UTC()
	}
	return exp
}
