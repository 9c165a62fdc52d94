package group

import (
	"github.com/capgate/capgate/api"
)

// Deleting a group (DeleteGroup) is what Kafka's DeleteGroups does for an
// operator — the group's committed offsets and settings are gone and it no
// longer lists or describes — but its partitions' epochs are not dropped
// at once: a gateway's reset snapshot lowers fences to the stored epochs,
// so forgetting a partition whose capabilities may still be alive would
// let them read again. The group is left as an empty husk, hidden, and
// the reaper forgets it like any empty group once every capability it
// issued has expired everywhere (limits.empty_group_ttl; reap.go). A join
// or a config change under the same name brings it back as a new, empty
// group whose epochs continue from the old ones. The hidden flag is not
// persisted: after a restart, a deleted group not yet reaped lists again
// as an empty group (no members, offsets or settings).

// groupNamed is the named group unless it does not exist or was deleted.
func (m *Machine) groupNamed(name string) *group {
	if g := m.groups[name]; g != nil && !g.deleted {
		return g
	}
	return nil
}

func (m *Machine) deleteGroup(e DeleteGroup) {
	g := m.groupNamed(e.Group)
	if g == nil {
		m.reject(e.Ref, api.CodeNotFound, "unknown group %q", e.Group)
		return
	}
	outside := 0
	for _, p := range g.leased {
		if p.lease.outside {
			outside++
		}
	}
	if (len(g.members) > 0 || outside > 0) && !e.Force {
		m.reject(e.Ref, api.CodeConflict, "group %q has %d live members and %d outside lease holders: delete with force to revoke them first", e.Group, len(g.members), outside)
		return
	}
	reply := DeleteGroupReply{Ref: e.Ref, Members: len(g.members), Leases: len(g.leased)}
	for _, id := range sortedKeys(g.members) {
		m.revokeLiveMember(g.members[id])
	}
	for _, p := range g.order {
		if p.lease != nil {
			m.endLease(p)
		}
		if p.committed >= 0 {
			reply.Offsets++
			m.audit.committed(p, -1, true)
			p.setCommitted(-1, "", 0)
			m.markOffset(p)
		}
	}
	if defaults := m.cfg.groupDefaults(); g.cfg != defaults || g.creator != "" {
		g.cfg = defaults
		m.setCreator(g, "", "") // its creator gets the place back
		m.putGroup(g)
	}
	g.deleted = true
	m.armSweep(m.sweepInterval())
	m.send(reply)
}
