package group

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/assign"
)

// GroupDescription is GET /v1/admin/groups/{g}: members sorted by id,
// partitions by topic and number.
type GroupDescription struct {
	Group  string
	Config GroupConfig
	// Creator is the tenant whose join created the group (Join.Tenant;
	// "" = nobody: an admin's group, or one recorded before creators
	// were kept). CreatorName is its credential's name when the group
	// keeps one (group.creatorName).
	Creator     string
	CreatorName string
	// MovesHeldBack counts the moves max_moves_per_second holds back
	// (owned partitions wanted by another member, not revoking yet):
	// the partitions show as owned, their newcomers wait (the whole
	// group's count, on every page).
	MovesHeldBack int
	Members       []MemberDescription
	Partitions    []PartitionDescription
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
	// TopicPatternStale: a later match of its pattern ran over
	// limits.topic_pattern_steps; it follows no new topic until it
	// rejoins (member.patternStale, topics.go).
	TopicPatternStale bool
	// TopicPatternMatches is how many topics a pattern member may be
	// assigned: those its pattern matched (len(member.resolved)).
	TopicPatternMatches int
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
	// Conflicts counts the polls and leaves of other gateway processes
	// refused under this id since this record was made; LastConflict is
	// the last one's time (zero: none).
	Conflicts    uint64
	LastConflict time.Time
}

// Groups lists the group names, sorted (deleted ones not).
func (m *Machine) Groups() []string {
	names := slices.Clone(m.names)
	return slices.DeleteFunc(names, func(n string) bool { return m.groups[n].deleted })
}

// GroupsPage lists at most limit group names after after, sorted, and
// whether more follow.
func (m *Machine) GroupsPage(after string, limit int) ([]string, bool) {
	names := m.Groups()
	i, found := slices.BinarySearch(names, after)
	if found {
		i++
	}
	names = names[i:]
	if len(names) > limit {
		return names[:limit], true
	}
	return names, false
}

// IsMember reports whether id is a live member of the group.
func (m *Machine) IsMember(groupName, id string) bool {
	return m.memberOf(groupName, id) != nil
}

// Page bounds one describe: at most Limit members and Limit partitions,
// and members only while their estimated JSON size stays within Bytes
// (at least one). MembersAfter and PartitionsAfter resume after the
// member id and partition of a previous page.
type Page struct {
	Limit           int
	Bytes           int
	MembersAfter    string
	PartitionsAfter *PartitionRef
}

// PartitionRef names a partition of a group in a page cursor.
type PartitionRef struct {
	Topic     string
	Partition int32
}

// Rest says where the next page starts: both cursors are set while
// either list has more (a list already exhausted resumes after its last
// item, so the next page has none of it), both nil at the end.
type Rest struct {
	MembersAfter    *string
	PartitionsAfter *PartitionRef
}

// DescribePage describes one page of a group (see Page); a member or
// partition added or removed between pages may be missed or seen twice,
// nothing else.
func (m *Machine) DescribePage(name string, page Page) (GroupDescription, Rest, bool) {
	g := m.groupNamed(name)
	if g == nil {
		return GroupDescription{}, Rest{}, false
	}
	d := GroupDescription{Group: name, Config: g.cfg, Creator: g.creator, CreatorName: g.creatorName, MovesHeldBack: m.movesHeldBack(g)}
	var rest Rest
	ids := sortedKeys(g.members)
	i, _ := slices.BinarySearch(ids, page.MembersAfter)
	if i < len(ids) && ids[i] == page.MembersAfter {
		i++
	}
	size := 0
	for ; i < len(ids); i++ {
		mem := g.members[ids[i]]
		size += describedBytes(mem)
		if len(d.Members) == page.Limit || (len(d.Members) > 0 && size > page.Bytes) {
			last := d.Members[len(d.Members)-1].ID
			rest.MembersAfter = &last
			break
		}
		d.Members = append(d.Members, m.describeMember(mem))
	}
	j := 0
	if a := page.PartitionsAfter; a != nil {
		j, _ = slices.BinarySearchFunc(g.order, assign.Partition{Topic: a.Topic, Partition: a.Partition}, func(p *partition, id assign.Partition) int {
			return comparePartitions(p.id, id)
		})
		if j < len(g.order) && g.order[j].id.Topic == a.Topic && g.order[j].id.Partition == a.Partition {
			j++
		}
	}
	for ; j < len(g.order); j++ {
		if len(d.Partitions) == page.Limit {
			last := d.Partitions[len(d.Partitions)-1]
			rest.PartitionsAfter = &PartitionRef{Topic: last.Topic, Partition: last.Partition}
			break
		}
		d.Partitions = append(d.Partitions, describePartition(g.order[j]))
	}
	if rest.MembersAfter == nil && rest.PartitionsAfter == nil {
		return d, rest, true
	}
	if rest.MembersAfter == nil {
		after := page.MembersAfter
		if n := len(d.Members); n > 0 {
			after = d.Members[n-1].ID
		} else if len(ids) > 0 {
			after = ids[len(ids)-1]
		}
		rest.MembersAfter = &after
	}
	if rest.PartitionsAfter == nil {
		after := page.PartitionsAfter
		if n := len(d.Partitions); n > 0 {
			after = &PartitionRef{Topic: d.Partitions[n-1].Topic, Partition: d.Partitions[n-1].Partition}
		} else if n := len(g.order); n > 0 {
			after = &PartitionRef{Topic: g.order[n-1].id.Topic, Partition: g.order[n-1].id.Partition}
		}
		rest.PartitionsAfter = after
	}
	return d, rest, true
}

// describedBytes estimates a member's JSON in a describe.
func describedBytes(mem *member) int {
	n := 320 + len(mem.id) + len(mem.instanceID) + len(mem.clientID) + len(mem.patternText) +
		len(mem.credential.ID) + len(mem.credential.Issuer) + len(mem.credential.Subject)
	for _, t := range mem.topics {
		n += len(t) + 3
	}
	return n
}

// DescribeGroup describes one group, whole.
func (m *Machine) DescribeGroup(name string) (GroupDescription, bool) {
	g := m.groupNamed(name)
	if g == nil {
		return GroupDescription{}, false
	}
	d := GroupDescription{Group: name, Config: g.cfg, Creator: g.creator, CreatorName: g.creatorName, MovesHeldBack: m.movesHeldBack(g)}
	for _, id := range sortedKeys(g.members) {
		d.Members = append(d.Members, m.describeMember(g.members[id]))
	}
	for _, p := range g.order {
		d.Partitions = append(d.Partitions, describePartition(p))
	}
	return d, true
}

// GroupSummary counts a group's members and partitions: what a list of
// groups shows (the console's groups page), without describing each
// one. Offsets are its partitions' committed offsets (-1: none), for a
// lag, when it has at most the offsetsMax Summarize was given; else nil.
type GroupSummary struct {
	Group                    string
	Config                   GroupConfig
	MovesHeldBack            int
	Members, Partitions      int
	Owned, Revoking, Unowned int
	Offsets                  []PartitionOffset
}

// PartitionOffset is a partition and its committed offset (-1: none).
type PartitionOffset struct {
	PartitionRef
	Committed int64
}

// Summarize sums one group up (GroupSummary).
func (m *Machine) Summarize(name string, offsetsMax int) (GroupSummary, bool) {
	g := m.groupNamed(name)
	if g == nil {
		return GroupSummary{}, false
	}
	s := GroupSummary{Group: name, Config: g.cfg, MovesHeldBack: m.movesHeldBack(g), Members: len(g.members), Partitions: len(g.order)}
	if len(g.order) <= offsetsMax {
		s.Offsets = make([]PartitionOffset, 0, len(g.order))
	}
	for _, p := range g.order {
		switch p.state() {
		case Owned:
			s.Owned++
		case Revoking:
			s.Revoking++
		default:
			s.Unowned++
		}
		if s.Offsets != nil {
			s.Offsets = append(s.Offsets, PartitionOffset{PartitionRef{p.id.Topic, p.id.Partition}, p.committed})
		}
	}
	return s, true
}

func (m *Machine) describeMember(mem *member) MemberDescription {
	d := MemberDescription{
		ID: mem.id, InstanceID: mem.instanceID, ClientID: mem.clientID, Credential: mem.credential,
		Topics: slices.Clone(mem.topics), TopicPattern: mem.patternText,
		SessionTimeout: mem.sessionTimeout, LastContact: mem.lastContact, Partitions: len(mem.held),
		TopicPatternStale: mem.patternStale,
	}
	if mem.pattern != nil {
		d.TopicPatternMatches = len(mem.resolved)
	}
	return d
}

// Gateways describes every known gateway, sorted by id.
func (m *Machine) Gateways() []GatewayDescription {
	out := make([]GatewayDescription, 0, len(m.gateways))
	for _, gw := range m.gateways {
		out = append(out, GatewayDescription{ID: gw.id, Acked: gw.acked, LastSeen: gw.lastSeen, Silent: m.silent(gw),
			Conflicts: gw.conflicts, LastConflict: gw.lastConflict})
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

// MemberOffsets is Offsets as member id of the group may read them: those
// of the topics it subscribes to (its topics, or those its pattern
// matches) — never another member's topic its credential may not cover
// (redteam11 #1). ok is false when id is no live member of the group.
func (m *Machine) MemberOffsets(groupName, id string) (out []api.CommittedOffset, ok bool) {
	mem := m.memberOf(groupName, id)
	if mem == nil {
		return nil, false
	}
	subscribes := mem.subscribes()
	for _, o := range m.Offsets(groupName) {
		if subscribes(o.Topic) {
			out = append(out, o)
		}
	}
	return out, true
}

// subscribes reports whether a topic is one of mem's topics, or one its
// pattern matches (one name at a time: (len+1) × its program's size
// steps at most, so not bounded here).
func (mem *member) subscribes() func(topic string) bool {
	if mem.pattern != nil {
		return mem.pattern.Scanner(math.MaxInt).Match
	}
	return func(topic string) bool { return slices.Contains(mem.topics, topic) }
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

func describePartition(p *partition) PartitionDescription {
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
	return pd
}
