package group_test

import (
	"os"
	"slices"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/coordinator/group"
)

// memStore applies Persist records like the shell's store would, keeping
// the latest record per key, and checks that persisted epochs and the
// sync seq never fall.
type memStore struct {
	groups   map[string]group.GroupRecord
	members  map[[2]string]group.MemberRecord
	parts    map[pkey]group.PartitionRecord
	offsets  map[pkey]group.OffsetRecord
	leases   map[pkey]group.LeaseRecord
	topics   map[string]group.TopicRecord
	denied   map[string]api.Denied
	revoked  map[[2]string]api.RevokedMember
	qos      map[string]api.QoSOverride
	gateways map[string]bool
	seq      uint64
	floor    uint64 // highest epoch forgotten
	writes   int
}

func newMemStore() *memStore {
	return &memStore{
		groups: map[string]group.GroupRecord{}, members: map[[2]string]group.MemberRecord{},
		parts: map[pkey]group.PartitionRecord{}, offsets: map[pkey]group.OffsetRecord{},
		leases: map[pkey]group.LeaseRecord{}, topics: map[string]group.TopicRecord{},
		denied: map[string]api.Denied{}, revoked: map[[2]string]api.RevokedMember{},
		qos: map[string]api.QoSOverride{}, gateways: map[string]bool{},
	}
}

func (s *memStore) apply(t testing.TB, records []group.Record) {
	t.Helper()
	for _, r := range records {
		s.writes++
		switch r := r.(type) {
		case group.GroupRecord:
			setOrDelete(s.groups, r.Group, r, r.Deleted)
		case group.MemberRecord:
			setOrDelete(s.members, [2]string{r.Group, r.MemberID}, r, r.Deleted)
		case group.PartitionRecord:
			k := key(r.Group, r.Topic, r.Partition)
			if old, ok := s.parts[k]; ok && r.Epoch < old.Epoch {
				t.Fatalf("persisted epoch of %v fell from %d to %d", k, old.Epoch, r.Epoch)
			}
			if _, ok := s.parts[k]; !ok && r.Epoch < s.floor {
				t.Fatalf("new partition %v at epoch %d below the floor %d", k, r.Epoch, s.floor)
			}
			if r.Forgotten {
				s.floor = max(s.floor, r.Epoch)
				delete(s.parts, k)
				continue
			}
			s.parts[k] = r
		case group.OffsetRecord:
			setOrDelete(s.offsets, key(r.Group, r.Topic, r.Partition), r, r.Offset < 0) // as the driver: DeleteOffset
		case group.LeaseRecord:
			setOrDelete(s.leases, key(r.Group, r.Topic, r.Partition), r, r.Deleted)
		case group.TopicRecord:
			setOrDelete(s.topics, r.Topic, r, r.Deleted)
		case group.DeniedRecord:
			setOrDelete(s.denied, r.Denied.JTI, r.Denied, r.Deleted)
		case group.RevokedMemberRecord:
			setOrDelete(s.revoked, [2]string{r.RevokedMember.Group, r.RevokedMember.MemberID}, r.RevokedMember, r.Deleted)
		case group.QoSRecord:
			setOrDelete(s.qos, r.Override.ID, r.Override, r.Deleted)
		case group.GatewayRecord:
			setOrDelete(s.gateways, r.ID, true, r.Deleted)
		case group.SyncSeqRecord:
			if r.Seq < s.seq {
				t.Fatalf("persisted sync seq fell from %d to %d", s.seq, r.Seq)
			}
			s.seq = r.Seq
		default:
			t.Fatalf("unknown record %T", r)
		}
	}
}

func setOrDelete[K comparable, V any](m map[K]V, k K, v V, deleted bool) {
	if deleted {
		delete(m, k)
	} else {
		m[k] = v
	}
}

func values[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// snapshot is what the shell would read back after a restart.
func (s *memStore) snapshot() group.Snapshot {
	gateways := make([]string, 0, len(s.gateways))
	for id := range s.gateways {
		gateways = append(gateways, id)
	}
	slices.Sort(gateways)
	return group.Snapshot{
		Groups: values(s.groups), Members: values(s.members), Partitions: values(s.parts),
		Offsets: values(s.offsets), Leases: values(s.leases), Topics: values(s.topics),
		Denied: values(s.denied), RevokedMembers: values(s.revoked), QoS: values(s.qos),
		Gateways: gateways, SyncSeq: s.seq, EpochFloor: s.floor,
	}
}

// minimalMoves is the tests' own assignor, independent of package assign:
// pins first, then every member keeps its lowest-numbered current
// partitions up to its floor/ceil quota, and freed or new partitions go to
// the members furthest below quota (ties: lowest id).
func minimalMoves(in assign.Input) assign.Assignment {
	out := assign.Assignment{}
	if len(in.Members) == 0 {
		return out
	}
	members := slices.Clone(in.Members)
	slices.SortFunc(members, func(a, b assign.Member) int { return compareStrings(a.ID, b.ID) })
	byID := make(map[string]assign.Member, len(members))
	for _, mem := range members {
		byID[mem.ID] = mem
	}
	parts := slices.Clone(in.Partitions)
	slices.SortFunc(parts, func(a, b assign.Partition) int {
		if a.Less(b) {
			return -1
		}
		if b.Less(a) {
			return 1
		}
		return 0
	})
	load := make(map[string]int)
	kept := make(map[string][]assign.Partition)
	for _, p := range parts {
		if id, ok := in.Pins[p]; ok && byID[id].Topics[p.Topic] {
			out[p] = id
			load[id]++
		} else if id, ok := in.Current[p]; ok && byID[id].Topics[p.Topic] {
			kept[id] = append(kept[id], p)
		}
	}
	quota := quotas(members, len(parts), kept)
	for _, mem := range members {
		for _, p := range kept[mem.ID] {
			if load[mem.ID] < quota[mem.ID] {
				out[p] = mem.ID
				load[mem.ID]++
			}
		}
	}
	for _, p := range parts {
		if _, ok := out[p]; ok {
			continue
		}
		best := ""
		for _, mem := range members {
			if !mem.Topics[p.Topic] {
				continue
			}
			if best == "" || load[mem.ID]-quota[mem.ID] < load[best]-quota[best] {
				best = mem.ID
			}
		}
		if best != "" {
			out[p] = best
			load[best]++
		}
	}
	return out
}

// quotas gives floor+1 to the members keeping the most (ties: lowest id).
func quotas(members []assign.Member, partitions int, kept map[string][]assign.Partition) map[string]int {
	n := len(members)
	order := slices.Clone(members)
	slices.SortStableFunc(order, func(a, b assign.Member) int { return len(kept[b.ID]) - len(kept[a.ID]) })
	quota := make(map[string]int, n)
	for i, mem := range order {
		quota[mem.ID] = partitions / n
		if i < partitions%n {
			quota[mem.ID]++
		}
	}
	return quota
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// testLookup resolves every assignor name to minimalMoves, except that
// "range" stays distinct by name (for the mismatch test).
func testLookup(name string) (assign.Func, bool) {
	if _, ok := assign.Lookup(name); !ok {
		return nil, false
	}
	return minimalMoves, true
}

func TestMain(m *testing.M) {
	group.SetAssignorLookup(testLookup)
	os.Exit(m.Run())
}
