package group

import (
	"slices"
	"strings"
	"time"

	"github.com/capgate/capgate/api"
)

// GroupDescription is GET /v1/admin/groups/{g}: members sorted by id,
// partitions by topic and number.
type GroupDescription struct {
	Group      string
	Config     GroupConfig
	Members    []MemberDescription
	Partitions []PartitionDescription
}

// MemberDescription is one live member.
type MemberDescription struct {
	ID             string
	InstanceID     string
	ClientID       string
	Credential     Credential
	Topics         []string
	TopicPattern   string
	SessionTimeout time.Duration
	LastContact    time.Time
	Partitions     int // owned or being revoked from it
}

// PartitionDescription is one partition of a group. Committed is -1 when
// nothing was committed.
type PartitionDescription struct {
	Topic            string
	Partition        int32
	Epoch            uint64
	State            PartitionState
	Owner            string // holder (owner, or the one being revoked from)
	OwnerOutside     bool
	OwnerEpoch       uint64
	Target           string
	TargetOutside    bool
	CapabilityExpiry time.Time
	RevokeStarted    time.Time
	GatewaysSafe     bool
	Released         bool
	Committed        int64
	Metadata         string
	LeaseHolder      string
	LeaseOutside     bool
	LeaseUntil       time.Time
}

// GatewayDescription is one row of GET /v1/admin/gateways.
type GatewayDescription struct {
	ID       string
	Acked    uint64
	LastSeen time.Time
	Silent   bool
}

// Groups lists the group names, sorted.
func (m *Machine) Groups() []string {
	return sortedKeys(m.groups)
}

// DescribeGroup describes one group.
func (m *Machine) DescribeGroup(name string) (GroupDescription, bool) {
	g := m.groups[name]
	if g == nil {
		return GroupDescription{}, false
	}
	d := GroupDescription{Group: name, Config: g.cfg}
	for _, id := range sortedKeys(g.members) {
		mem := g.members[id]
		d.Members = append(d.Members, MemberDescription{
			ID: id, InstanceID: mem.instanceID, ClientID: mem.clientID, Credential: mem.credential,
			Topics: slices.Clone(mem.topics), TopicPattern: mem.patternText,
			SessionTimeout: mem.sessionTimeout, LastContact: mem.lastContact, Partitions: len(mem.held),
		})
	}
	for _, p := range g.order {
		pd := PartitionDescription{
			Topic: p.id.Topic, Partition: p.id.Partition, Epoch: p.epoch, State: p.state(),
			Committed: p.committed, Metadata: p.metadata,
		}
		if c, epoch := p.outstanding(); c != nil {
			pd.Owner, pd.OwnerOutside, pd.OwnerEpoch, pd.CapabilityExpiry = c.holder.id, c.holder.outside, epoch, c.expiry
		}
		if r := p.revocation(); r != nil {
			pd.Target, pd.TargetOutside = r.to.id, r.to.outside
			pd.RevokeStarted, pd.GatewaysSafe, pd.Released = r.started, r.gatewaysSafe, r.released
		}
		if p.lease != nil {
			pd.LeaseHolder, pd.LeaseOutside, pd.LeaseUntil = p.lease.holder, p.lease.outside, p.lease.until
		}
		d.Partitions = append(d.Partitions, pd)
	}
	return d, true
}

// Gateways describes every known gateway, sorted by id.
func (m *Machine) Gateways() []GatewayDescription {
	out := make([]GatewayDescription, 0, len(m.gateways))
	for _, gw := range m.gateways {
		out = append(out, GatewayDescription{ID: gw.id, Acked: gw.acked, LastSeen: gw.lastSeen, Silent: m.silent(gw)})
	}
	slices.SortFunc(out, func(a, b GatewayDescription) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Offsets lists a group's committed offsets, sorted.
func (m *Machine) Offsets(groupName string) []api.CommittedOffset {
	g := m.groups[groupName]
	if g == nil {
		return nil
	}
	var out []api.CommittedOffset
	for _, p := range g.order {
		if p.committed >= 0 {
			out = append(out, api.CommittedOffset{Topic: p.id.Topic, Partition: p.id.Partition, Offset: p.committed, Metadata: p.metadata})
		}
	}
	return out
}

// SyncSeq is the highest sync sequence number handed out.
func (m *Machine) SyncSeq() uint64 {
	return m.log.seq
}

// QoS lists the QoS overrides in force, sorted by id.
func (m *Machine) QoS() []api.QoSOverride {
	out := make([]api.QoSOverride, 0, len(m.qos))
	for _, id := range sortedKeys(m.qos) {
		out = append(out, m.qos[id])
	}
	return out
}
