package sim

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

// store is the coordinator's durable fake store: the latest record of
// every key a Ready persisted, surviving crashes. Persisting a Ready is
// atomic (one synchronous transaction in the real store).
type store struct {
	losesOffsets bool // planted bug: odd committed offsets are not written
	partitions   map[partKey]group.PartitionRecord
	offsets      map[partKey]group.OffsetRecord
	members      map[memberKey]group.MemberRecord
	groups       map[string]group.GroupRecord
	leases       map[partKey]group.LeaseRecord
	denied       map[string]api.Denied
	revoked      map[memberKey]api.RevokedMember
	qos          map[string]api.QoSOverride
	gateways     map[string]bool
	topics       map[string]group.TopicRecord
	syncSeq      uint64
}

type partKey struct {
	group, topic string
	partition    int32
}

type memberKey struct{ group, member string }

func newStore() *store {
	return &store{
		partitions: map[partKey]group.PartitionRecord{}, offsets: map[partKey]group.OffsetRecord{},
		members: map[memberKey]group.MemberRecord{}, groups: map[string]group.GroupRecord{},
		leases: map[partKey]group.LeaseRecord{}, denied: map[string]api.Denied{},
		revoked: map[memberKey]api.RevokedMember{}, qos: map[string]api.QoSOverride{},
		gateways: map[string]bool{}, topics: map[string]group.TopicRecord{},
	}
}

// apply writes one Ready's records.
func (s *store) apply(records []group.Record) {
	for _, r := range records {
		s.put(r)
	}
}

func (s *store) put(r group.Record) {
	switch r := r.(type) {
	case group.PartitionRecord:
		s.partitions[partKey{r.Group, r.Topic, r.Partition}] = r
	case group.OffsetRecord:
		if s.losesOffsets && r.Offset%2 == 1 {
			return
		}
		s.offsets[partKey{r.Group, r.Topic, r.Partition}] = r
	case group.MemberRecord:
		putOrDelete(s.members, memberKey{r.Group, r.MemberID}, r, r.Deleted)
	case group.GroupRecord:
		s.groups[r.Group] = r
	case group.LeaseRecord:
		putOrDelete(s.leases, partKey{r.Group, r.Topic, r.Partition}, r, r.Deleted)
	case group.DeniedRecord:
		putOrDelete(s.denied, r.Denied.JTI, r.Denied, r.Deleted)
	case group.RevokedMemberRecord:
		putOrDelete(s.revoked, memberKey{r.RevokedMember.Group, r.RevokedMember.MemberID}, r.RevokedMember, r.Deleted)
	case group.QoSRecord:
		putOrDelete(s.qos, r.Override.ID, r.Override, r.Deleted)
	case group.GatewayRecord:
		s.gateways[r.ID] = true
	case group.SyncSeqRecord:
		s.syncSeq = r.Seq
	case group.TopicRecord:
		putOrDelete(s.topics, r.Topic, r, r.Deleted)
	default:
		panic(fmt.Sprintf("sim: store: unknown record %T", r))
	}
}

func putOrDelete[K comparable, V any](m map[K]V, k K, v V, deleted bool) {
	if deleted {
		delete(m, k)
		return
	}
	m[k] = v
}

// snapshot reads everything back for group.Restore, in a stable order.
func (s *store) snapshot() group.Snapshot {
	snap := group.Snapshot{SyncSeq: s.syncSeq}
	snap.Groups = sortedValues(s.groups, cmp.Compare[string])
	snap.Members = sortedValues(s.members, compareMemberKeys)
	snap.Partitions = sortedValues(s.partitions, comparePartKeys)
	snap.Offsets = sortedValues(s.offsets, comparePartKeys)
	snap.Leases = sortedValues(s.leases, comparePartKeys)
	snap.Topics = sortedValues(s.topics, cmp.Compare[string])
	snap.Denied = sortedValues(s.denied, cmp.Compare[string])
	snap.RevokedMembers = sortedValues(s.revoked, compareMemberKeys)
	snap.QoS = sortedValues(s.qos, cmp.Compare[string])
	for id := range s.gateways {
		snap.Gateways = append(snap.Gateways, id)
	}
	slices.Sort(snap.Gateways)
	return snap
}

func sortedValues[K comparable, V any](m map[K]V, compare func(a, b K) int) []V {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compare)
	out := make([]V, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

func comparePartKeys(a, b partKey) int {
	return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
}

func compareMemberKeys(a, b memberKey) int {
	return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.member, b.member))
}
