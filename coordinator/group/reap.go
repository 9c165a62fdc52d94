package group

import (
	"time"
)

// Reaping: a group nobody uses is forgotten, so joins under ever new group
// names cannot make the coordinator hold groups without end. A group is
// reapable when it has no members, leases, pending moves or waiting admin
// requests, default settings, no committed offset and every partition
// unowned; it is forgotten once a sweep has found it so for
// limits.empty_group_ttl (at least max_lease + leeway + max_clock_skew,
// so every capability it ever issued has expired everywhere). Its
// partitions' epochs go with it, but the highest of them becomes the
// epoch floor (store.MetaEpochFloor): every partition created later
// starts there, so no epoch is granted twice and a gateway still holding
// a fence of the forgotten group admits the new grants.

// reapBatchPartitions bounds the partitions one sweep forgets (each is up
// to three store writes, one Ready is one transaction); the rest wait for
// the next sweep, a second later.
const reapBatchPartitions = 10_000

// armSweep pushes the next reap sweep when reaping is on.
func (m *Machine) armSweep(after time.Duration) {
	if m.cfg.Limits.EmptyGroupTTL <= 0 || m.sweepArmed {
		return
	}
	m.sweepArmed = true
	m.push(timer{at: m.now.Add(after), kind: timerSweep})
}

// sweepInterval is how often groups are checked: a quarter of the TTL,
// so a group is forgotten at most a quarter late.
func (m *Machine) sweepInterval() time.Duration {
	return max(m.cfg.Limits.EmptyGroupTTL/4, time.Second)
}

func (m *Machine) onSweepTimer() {
	m.sweepArmed = false
	budget := reapBatchPartitions
	for _, name := range sortedKeys(m.groups) {
		g := m.groups[name]
		switch {
		case !m.reapable(g):
			g.emptySince = time.Time{}
		case g.emptySince.IsZero():
			g.emptySince = m.now
		case m.now.Sub(g.emptySince) >= m.cfg.Limits.EmptyGroupTTL && len(g.parts) <= budget:
			budget -= len(g.parts)
			m.reap(g)
		case m.now.Sub(g.emptySince) >= m.cfg.Limits.EmptyGroupTTL:
			m.armSweep(time.Second) // this Ready is full: the rest next time
			return
		}
	}
	m.armSweep(m.sweepInterval())
}

func (m *Machine) reapable(g *group) bool {
	if len(g.members) > 0 || len(g.leased) > 0 || len(g.pendingMoves) > 0 || g.reassign || g.cfg != m.cfg.groupDefaults() {
		return false
	}
	for _, p := range g.order {
		if p.state() != Unowned || p.committed >= 0 || p.lease != nil || len(p.revokeWaiters) > 0 || p.leaseWaiter != 0 {
			return false
		}
	}
	return true
}

// reap forgets g: its partitions (raising the epoch floor to their
// highest epoch) and its settings.
func (m *Machine) reap(g *group) {
	for _, p := range g.order {
		m.epochFloor = max(m.epochFloor, p.epoch)
		m.putRecord(recordKey{kind: keyPartition, first: g.name, other: p.id.Topic, number: p.id.Partition}, PartitionRecord{
			Group: g.name, Topic: p.id.Topic, Partition: p.id.Partition, Epoch: p.epoch, State: Unowned, Forgotten: true})
	}
	m.putRecord(recordKey{kind: keyGroup, first: g.name}, GroupRecord{Group: g.name, Config: g.cfg, Deleted: true})
	m.tally.partitions -= int64(len(g.parts))
	m.tally.groups--
	delete(m.groups, g.name)
}
