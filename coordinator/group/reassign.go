package group

import (
	"time"

	"github.com/capgate/capgate/coordinator/assign"
)

// reassignGroup runs the group's assignor and moves what changed: unowned
// partitions are granted at once, owned ones start a handoff (subject to
// creeping), revoking ones are retargeted. Partitions whose owner stays
// are not touched. While its join window is open (window.go) the group
// assigns as if it had no member.
func (m *Machine) reassignGroup(g *group) {
	m.createPartitions(g)
	fn, ok := m.lookup(g.cfg.Assignor)
	if !ok {
		panic("group: group " + g.name + " has unknown assignor " + g.cfg.Assignor)
	}
	target := assign.Assignment{}
	if len(g.members) > 0 && !g.window.holding() { // window.go
		target = fn(m.assignInput(g))
	}
	g.target = target
	g.pendingMoves = g.pendingMoves[:0]
	for _, p := range g.order {
		want := m.desired(g, p)
		switch s := p.own.(type) {
		case unowned:
			if !want.none() {
				m.grantNow(p, want)
			}
		case *owned:
			if !s.moves(want) {
				continue
			}
			if m.moveAllowed(g, p, s, want) {
				m.startMove(p, want)
			} else {
				g.pendingMoves = append(g.pendingMoves, p)
			}
		case *revoking:
			m.retarget(p, want)
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
		switch s := p.own.(type) {
		case *owned:
			if s.force == forceNone && !s.cap.holder.outside {
				in.Current[p.id] = s.cap.holder.id
			} // else an admin revoke lets the assignor place it afresh
		case *revoking:
			if !s.to.none() && !s.to.outside {
				in.Current[p.id] = s.to.id
			}
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
// pick (zero = nobody).
func (m *Machine) desired(g *group, p *partition) holder {
	if p.lease != nil && p.lease.outside && p.id.Partition < m.topics[p.id.Topic] {
		return holder{id: p.lease.holder, outside: true}
	}
	if id := g.target[p.id]; g.isMember(id) {
		return holder{id: id}
	}
	return holder{}
}

// moves reports whether an owned partition must move to want: another
// holder, or an admin action pending.
func (o *owned) moves(want holder) bool {
	return want != o.cap.holder || o.force != forceNone
}

// moveAllowed applies creeping to moves away from a live member that
// nobody forced; it takes a slot when it allows one.
func (m *Machine) moveAllowed(g *group, p *partition, o *owned, target holder) bool {
	rate := g.cfg.MaxMovesPerSecond
	exempt := o.force != forceNone || o.cap.holder.outside || !g.isMember(o.cap.holder.id) ||
		(p.lease != nil && p.lease.holder == target.id)
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
		want := m.desired(g, p)
		o := p.owner()
		if o == nil || !o.moves(want) {
			continue
		}
		if !m.moveAllowed(g, p, o, want) {
			g.pendingMoves = append(g.pendingMoves, pending[i:]...)
			break
		}
		m.startMove(p, want)
	}
	m.armMoves(g)
}
