package group

import (
	"time"

	"github.com/capgate/capgate/coordinator/assign"
)

// reassignGroup runs the group's assignor and moves what changed: unowned
// partitions are granted at once, owned ones start a handoff (subject to
// creeping), revoking ones are retargeted. Partitions whose owner stays
// are not touched.
func (m *Machine) reassignGroup(g *group) {
	m.createPartitions(g)
	fn, ok := m.lookup(g.cfg.Assignor)
	if !ok {
		panic("group: group " + g.name + " has unknown assignor " + g.cfg.Assignor)
	}
	target := assign.Assignment{}
	if len(g.members) > 0 {
		target = fn(m.assignInput(g))
	}
	g.target = target
	g.pendingMoves = g.pendingMoves[:0]
	for _, p := range g.order {
		holder, outside := m.desired(g, p)
		switch p.state {
		case Unowned:
			if holder != "" {
				m.grantNow(p, holder, outside)
			}
		case Owned:
			if holder == p.holder && outside == p.holderOutside && p.force == forceNone {
				continue
			}
			if m.moveAllowed(g, p, holder) {
				m.startMove(p, holder, outside)
			} else {
				g.pendingMoves = append(g.pendingMoves, p)
			}
		case Revoking:
			m.retarget(p, holder, outside)
		}
	}
	m.armMoves(g)
}

// createPartitions makes sure every partition of every subscribed topic
// exists in the group.
func (m *Machine) createPartitions(g *group) {
	for topic := range g.subscribed {
		count := m.topics[topic]
		for i := g.created[topic]; i < count; i++ {
			g.partition(assign.Partition{Topic: topic, Partition: i})
		}
		if count > g.created[topic] {
			g.created[topic] = count
		}
	}
}

// assignable reports whether p exists, someone may take it, and no outside
// holder leases it.
func (m *Machine) assignable(g *group, p *partition) bool {
	if p.id.Partition >= m.topics[p.id.Topic] || g.subscribed[p.id.Topic] == 0 {
		return false
	}
	return p.lease == nil || !p.lease.outside
}

// assignInput builds the assignor's input in buffers the group reuses
// (assignors never keep or modify their input).
func (m *Machine) assignInput(g *group) assign.Input {
	in := &g.input
	if in.Current == nil {
		in.Current = make(map[assign.Partition]string, len(g.order))
		in.Pins = make(map[assign.Partition]string)
	}
	clear(in.Current)
	clear(in.Pins)
	in.Members, in.Partitions = in.Members[:0], in.Partitions[:0]
	for _, mem := range g.members {
		in.Members = append(in.Members, assign.Member{ID: mem.id, Topics: mem.resolved})
	}
	for _, p := range g.order {
		if !m.assignable(g, p) {
			continue
		}
		in.Partitions = append(in.Partitions, p.id)
		if p.force != forceNone {
			continue // an admin revoke lets the assignor place it afresh
		}
		switch {
		case p.state == Owned && !p.holderOutside:
			in.Current[p.id] = p.holder
		case p.state == Revoking && p.target != "" && !p.targetOutside:
			in.Current[p.id] = p.target
		}
	}
	for _, p := range g.leased {
		if p.lease != nil && !p.lease.outside {
			in.Pins[p.id] = p.lease.holder
		}
	}
	return *in
}

// desired is where p should be: its outside lease holder, or the assignor's
// pick ("" = nobody).
func (m *Machine) desired(g *group, p *partition) (string, bool) {
	if p.lease != nil && p.lease.outside && p.id.Partition < m.topics[p.id.Topic] {
		return p.lease.holder, true
	}
	if id := g.target[p.id]; g.isMember(id) {
		return id, false
	}
	return "", false
}

// moveAllowed applies creeping to moves away from a live member that
// nobody forced; it takes a slot when it allows one.
func (m *Machine) moveAllowed(g *group, p *partition, target string) bool {
	rate := g.cfg.MaxMovesPerSecond
	exempt := p.force != forceNone || p.holderOutside || !g.isMember(p.holder) ||
		(p.lease != nil && p.lease.holder == target)
	if rate == 0 || exempt {
		return true
	}
	if m.now.Before(g.nextMoveAt) {
		return false
	}
	g.nextMoveAt = m.now.Add(time.Second / time.Duration(rate))
	return true
}

func (m *Machine) armMoves(g *group) {
	if len(g.pendingMoves) > 0 && !g.moveArmed {
		g.moveArmed = true
		m.push(timer{at: g.nextMoveAt, kind: timerMoves, group: g})
	}
}

// startPendingMoves starts the moves creeping held back, in partition
// order, as far as the rate allows.
func (m *Machine) startPendingMoves(g *group) {
	if g.reassign {
		return // a reassignment is queued; it recomputes the pending moves
	}
	pending := g.pendingMoves
	g.pendingMoves = nil
	for i, p := range pending {
		holder, outside := m.desired(g, p)
		if p.state != Owned || (holder == p.holder && outside == p.holderOutside && p.force == forceNone) {
			continue
		}
		if !m.moveAllowed(g, p, holder) {
			g.pendingMoves = append(g.pendingMoves, pending[i:]...)
			break
		}
		m.startMove(p, holder, outside)
	}
	m.armMoves(g)
}
