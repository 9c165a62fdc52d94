package group

import (
	"slices"
	"time"
)

// Reaping: a group nobody uses is forgotten, so joins under ever new group
// names cannot make the coordinator hold groups without end. A group is
// idle when it has no members, leases, pending moves or waiting admin
// requests, default settings and every partition unowned; it is
// forgotten once sweeps have found it so for limits.empty_group_ttl or,
// when it holds committed offsets, for limits.offsets_retention (Kafka's
// offsets.retention.minutes; a changed offset restarts it), and its
// offsets go with it. Both are at least max_lease + leeway +
// max_clock_skew, so every capability it ever issued has expired
// everywhere. The idle clock is not persisted: a restart starts it again.
// Its partitions' epochs go with it, but the highest of them becomes the
// epoch floor (store.MetaEpochFloor): every partition created later
// starts there, so no epoch is granted twice and a gateway still holding
// a fence of the forgotten group admits the new grants.

// reapBatchPartitions bounds the partitions one sweep forgets (each is up
// to three store writes, one Ready is one transaction); the rest wait for
// the next sweep, a second later.
const reapBatchPartitions = 10_000

// armSweep pushes the next reap sweep when reaping is on.
func (m *Machine) armSweep(after time.Duration) {
	if m.reapDelay() <= 0 || m.sweepArmed {
		return
	}
	m.sweepArmed = true
	m.push(timer{at: m.now.Add(after), kind: timerSweep})
}

// reapDelay is the shorter of empty_group_ttl and offsets_retention that
// is on (0: neither, nothing is reaped).
func (m *Machine) reapDelay() time.Duration {
	l := m.cfg.Limits
	switch {
	case l.EmptyGroupTTL <= 0:
		return l.OffsetsRetention
	case l.OffsetsRetention <= 0:
		return l.EmptyGroupTTL
	}
	return min(l.EmptyGroupTTL, l.OffsetsRetention)
}

// sweepInterval is how often groups are checked: a quarter of the
// shorter delay, so a group is forgotten at most a quarter late.
func (m *Machine) sweepInterval() time.Duration {
	return max(m.reapDelay()/4, time.Second)
}

func (m *Machine) onSweepTimer() {
	m.sweepArmed = false
	budget := reapBatchPartitions
	for _, name := range sortedKeys(m.groups) {
		g := m.groups[name]
		after, idle := m.reapAfter(g)
		switch {
		case !idle:
			g.emptySince = time.Time{}
		case g.emptySince.IsZero():
			g.emptySince = m.now
		case after <= 0 || m.now.Sub(g.emptySince) < after:
		case len(g.parts) <= budget:
			budget -= len(g.parts)
			m.reap(g)
		default:
			m.armSweep(time.Second) // this Ready is full: the rest next time
			return
		}
	}
	m.armSweep(m.sweepInterval())
}

// reapAfter reports whether g is idle — no members, leases, pending moves
// or waiting admin requests, default settings, every partition unowned —
// and how long it must stay so to be forgotten: empty_group_ttl, or
// offsets_retention when it holds a committed offset (0: kept).
func (m *Machine) reapAfter(g *group) (time.Duration, bool) {
	if len(g.members) > 0 || len(g.leased) > 0 || len(g.pendingMoves) > 0 || g.reassign || g.cfg != m.cfg.groupDefaults() {
		return 0, false
	}
	offsets := false
	for _, p := range g.order {
		if p.state() != Unowned || p.lease != nil || len(p.revokeWaiters) > 0 || p.leaseWaiter != 0 {
			return 0, false
		}
		offsets = offsets || p.committed >= 0
	}
	if offsets {
		return m.cfg.Limits.OffsetsRetention, true
	}
	return m.cfg.Limits.EmptyGroupTTL, true
}

// reap forgets g: its partitions (raising the epoch floor to their
// highest epoch), committed offsets, settings and creator's place.
func (m *Machine) reap(g *group) {
	for _, p := range g.order {
		m.epochFloor = max(m.epochFloor, p.epoch)
		m.putRecord(recordKey{kind: keyPartition, first: g.name, other: p.id.Topic, number: p.id.Partition}, PartitionRecord{
			Group: g.name, Topic: p.id.Topic, Partition: p.id.Partition, Epoch: p.epoch, State: Unowned, Forgotten: true})
		if p.committed >= 0 {
			m.putRecord(recordKey{kind: keyOffset, first: g.name, other: p.id.Topic, number: p.id.Partition}, OffsetRecord{
				Group: g.name, Topic: p.id.Topic, Partition: p.id.Partition, Offset: -1})
		}
		p.setCommitted(-1, "", 0) // gives its metadata's place back
	}
	m.setCreator(g, "", "")
	m.putRecord(recordKey{kind: keyGroup, first: g.name}, GroupRecord{Group: g.name, Config: g.cfg, Deleted: true})
	m.tally.partitions -= int64(len(g.parts))
	m.tally.groups--
	delete(m.groups, g.name)
	if i, found := slices.BinarySearch(m.names, g.name); found {
		m.names = slices.Delete(m.names, i, i+1)
	}
}
