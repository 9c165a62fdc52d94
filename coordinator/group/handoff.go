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

// startMove begins moving an owned partition to target (zero = nobody).
func (m *Machine) startMove(p *partition, target holder) {
	r := p.toRevoking(target, m.now)
	m.fence(p)
	mem := p.group.members[r.from.holder.id]
	if mem != nil && !r.from.holder.outside {
		mem.news.drop(p)
		if r.from.sent {
			mem.news.revoke = append(mem.news.revoke, p.ref(r.fromEpoch))
			m.queueNews(mem)
		}
	}
	m.push(timer{at: r.started.Add(p.group.cfg.HandoffTimeout), kind: timerHandoff, partition: p})
	m.push(timer{at: m.expiredAt(r), kind: timerHandoff, partition: p})
	m.tryComplete(p)
}

// fence raises the epoch of a revoking partition and puts the fence on
// the sync log.
func (m *Machine) fence(p *partition) {
	r := p.revocation()
	p.epoch++
	m.audit.epochIssued(p)
	r.gatewaysSafe = false
	r.fenceSeq = m.appendEntry(syncEntry{kind: entryFence, fence: p.fence()})
	m.handoffs.push(r.fenceSeq, p)
	m.markDirty(p)
}

// retarget changes where a revoking partition goes. Back to its holder it
// needs a fresh epoch and fence; anywhere else the pending epoch (never
// granted) and the progress so far stay.
func (m *Machine) retarget(p *partition, target holder) {
	r := p.revocation()
	if r.to == target {
		return
	}
	r.to = target
	if !target.none() && target == r.from.holder {
		m.fence(p)
	}
	m.markDirty(p)
	m.tryComplete(p)
}

// tryComplete finishes a handoff whose conditions hold. Safe to call at any
// time for any partition.
func (m *Machine) tryComplete(p *partition) {
	r := p.revocation()
	if r == nil {
		return
	}
	if !r.gatewaysSafe && (m.holderExpired(r) || r.fenceSeq <= m.gatewayWatermark()) {
		m.setGatewaysSafe(p, r)
	}
	if !r.gatewaysSafe || !m.holderDone(p, r) {
		return
	}
	if !r.to.none() && !r.to.outside && !p.group.isMember(r.to.id) {
		m.queueReassign(p.group) // the target left; reassignment retargets
		return
	}
	m.audit.checkHandoff(m, p, r)
	if mem := p.group.members[r.from.holder.id]; mem != nil && !r.from.holder.outside {
		delete(mem.held, p)
	}
	if r.to.none() {
		p.toUnowned()
		m.markDirty(p)
		return
	}
	m.grant(p, r.to)
}

func (m *Machine) setGatewaysSafe(p *partition, r *revoking) {
	m.audit.checkGatewaysSafe(m, p, r)
	r.gatewaysSafe = true
	for _, ref := range p.revokeWaiters {
		m.send(RevokeReply{Ref: ref, Group: p.group.name, Topic: p.id.Topic, Partition: p.id.Partition, Epoch: p.epoch})
	}
	p.revokeWaiters = nil
}

// holderExpired reports whether every capability of the revoked holder has
// expired everywhere: exp + leeway + max_clock_skew < now.
func (m *Machine) holderExpired(r *revoking) bool {
	return m.now.After(r.from.bound.Add(m.cfg.Leeway + m.cfg.MaxClockSkew))
}

// expiredAt is the first instant holderExpired is true.
func (m *Machine) expiredAt(r *revoking) time.Time {
	return r.from.bound.Add(m.cfg.Leeway + m.cfg.MaxClockSkew + 1)
}

// holderDone reports whether the revoked holder let go: released, gone,
// never able to commit, or out of time.
func (m *Machine) holderDone(p *partition, r *revoking) bool {
	return r.released || r.forced || r.from.holder.outside ||
		!p.group.isMember(r.from.holder.id) ||
		!m.now.Before(r.started.Add(p.group.cfg.HandoffTimeout))
}

// grantNow gives an unowned partition to h under a fresh epoch.
func (m *Machine) grantNow(p *partition, h holder) {
	p.epoch++
	m.audit.epochIssued(p)
	m.grant(p, h)
}

// grant makes h the owner at p.epoch and tells it.
func (m *Machine) grant(p *partition, h holder) {
	exp := m.expiry(m.cfg.CapabilityLease)
	if h.outside {
		exp = m.outsideExpiry(p)
	}
	o := p.toOwned(h, exp)
	m.markDirty(p)
	g := m.grantOf(p)
	m.audit.granted(p, g)
	if !h.outside {
		mem := p.group.members[h.id]
		mem.held[p] = struct{}{}
		mem.news.addGrant(p)
		m.queueNews(mem)
	}
	if p.leaseWaiter != 0 && p.lease != nil && p.lease.holder == h.id {
		o.cap.sent = true
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
	c, epoch := p.outstanding()
	g := Grant{
		Group: p.group.name, Holder: c.holder.id, Outside: c.holder.outside,
		Topic: p.id.Topic, Partition: p.id.Partition, Epoch: epoch,
		Offset: offset, ExpiresAt: c.expiry,
	}
	if mem := p.group.members[c.holder.id]; mem != nil && !c.holder.outside {
		g.Tenant = mem.credential.tenant()
	}
	return g
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
