package group

// Behavior: the Kafka listener's view of groups (Kafka's ListGroups and
// DescribeGroups, served to a tenant through GET /v1/groups and
// GET /v1/groups/{group}). Read-only; bounded by the caller's limits.
//
// Kafka's group states from capgate's:
//
//	Empty                no live member
//	PreparingRebalance   a partition is being revoked (a handoff in
//	                     progress: gateways fencing, the holder releasing),
//	                     or is to be: a move max_moves_per_second holds
//	                     back (its newcomer still waits for it)
//	CompletingRebalance  none is, but a partition of a topic a member may
//	                     be assigned is unowned (its grant is on its way)
//	Stable               otherwise
//
// capgate has no Dead group: a group that is unknown (or deleted) is not
// found, and the listener answers it as Kafka answers an unknown group.

import (
	"slices"
	"strings"
)

// Kafka's group states (ListGroups, DescribeGroups).
const (
	KafkaEmpty               = "Empty"
	KafkaStable              = "Stable"
	KafkaPreparingRebalance  = "PreparingRebalance"
	KafkaCompletingRebalance = "CompletingRebalance"
	KafkaDead                = "Dead"
)

// KafkaView is one group as Kafka's DescribeGroups shows it.
type KafkaView struct {
	Group    string
	State    string
	Assignor string
	Members  []KafkaMember
	// Truncated: members or owned partitions beyond the bounds were left
	// out.
	Truncated bool
}

// KafkaMember is one live member and the partitions it owns, sorted (a
// partition being revoked from it is no longer its own).
type KafkaMember struct {
	ID, InstanceID, ClientID string
	Topics                   []string // its topics, or those its pattern resolved to, sorted
	Owned                    []PartitionRef
}

// KafkaState is the group's state in Kafka's words, and whether the group
// exists. It reads every partition of the group once.
func (m *Machine) KafkaState(name string) (string, bool) {
	g := m.groupNamed(name)
	if g == nil {
		return "", false
	}
	return m.kafkaState(g), true
}

func (m *Machine) kafkaState(g *group) string {
	if len(g.members) == 0 {
		return KafkaEmpty
	}
	if m.movesHeldBack(g) > 0 {
		return KafkaPreparingRebalance
	}
	var assignable map[string]bool // topics some member may be assigned, built at the first unowned partition
	pending := false
	for _, p := range g.order {
		switch p.state() {
		case Revoking:
			return KafkaPreparingRebalance
		case Unowned:
			if assignable == nil {
				assignable = assignableTopics(g)
			}
			pending = pending || assignable[p.id.Topic]
		}
	}
	if pending {
		return KafkaCompletingRebalance
	}
	return KafkaStable
}

// movesHeldBack counts the moves creeping holds back that are still
// wanted (startPendingMoves checks each again when it starts them).
func (m *Machine) movesHeldBack(g *group) int {
	n := 0
	for _, p := range g.pendingMoves {
		if o := p.owner(); o != nil && o.moves(m.desired(g, p)) {
			n++
		}
	}
	return n
}

// assignableTopics are the topics some member of g may be assigned.
func assignableTopics(g *group) map[string]bool {
	out := map[string]bool{}
	for _, mem := range g.members {
		for t, ok := range mem.resolved {
			out[t] = out[t] || ok
		}
		for _, t := range mem.topics {
			out[t] = true
		}
	}
	return out
}

// KafkaView describes the group for DescribeGroups: at most maxMembers
// members (in id order), maxOwned owned partitions in all, and members
// only while their estimated JSON stays within maxBytes (at least one:
// kafkaMemberBytes); more sets Truncated. False when the group does not
// exist. Without the bytes bound one answer was the members' whole
// subscriptions — 25 MB for 120 members of 1,000 long topic names —
// held until sent, however slowly the reader reads (redteam14 #6).
func (m *Machine) KafkaView(name string, maxMembers, maxOwned, maxBytes int) (KafkaView, bool) {
	g := m.groupNamed(name)
	if g == nil {
		return KafkaView{}, false
	}
	v := KafkaView{Group: name, State: m.kafkaState(g), Assignor: g.cfg.Assignor}
	owned, size := 0, 0
	for _, id := range sortedKeys(g.members) {
		if len(v.Members) == maxMembers {
			v.Truncated = true
			break
		}
		mem := g.members[id]
		km := KafkaMember{ID: mem.id, InstanceID: mem.instanceID, ClientID: mem.clientID, Topics: memberTopics(mem)}
		for p := range mem.held {
			if o := p.owner(); o == nil || !o.cap.holder.member(mem.id) {
				continue
			}
			if owned == maxOwned {
				v.Truncated = true
				break
			}
			owned++
			km.Owned = append(km.Owned, PartitionRef{Topic: p.id.Topic, Partition: p.id.Partition})
		}
		slices.SortFunc(km.Owned, func(a, b PartitionRef) int {
			if c := strings.Compare(a.Topic, b.Topic); c != 0 {
				return c
			}
			return int(a.Partition) - int(b.Partition)
		})
		if size += kafkaMemberBytes(km); len(v.Members) > 0 && size > maxBytes {
			v.Truncated = true
			break
		}
		v.Members = append(v.Members, km)
	}
	return v, true
}

// UsesTopic reports whether a live member of group name subscribes to
// (its topics, or those its pattern resolved to) or owns a partition of
// a topic for which hidden is true; false for an unknown group. It
// walks every member, as a truncated KafkaView does not.
func (m *Machine) UsesTopic(name string, hidden func(topic string) bool) bool {
	g := m.groupNamed(name)
	if g == nil {
		return false
	}
	for _, mem := range g.members {
		for t := range mem.resolved { // a topic list's every topic; a pattern's matches
			if hidden(t) {
				return true
			}
		}
		for p := range mem.held {
			if o := p.owner(); o != nil && o.cap.holder.member(mem.id) && hidden(p.id.Topic) {
				return true
			}
		}
	}
	return false
}

// kafkaMemberBytes estimates km's JSON in a tenant's describe
// (api.TenantMember): its fields' names and quotes, its ids, each topic,
// and each owned partition.
func kafkaMemberBytes(km KafkaMember) int {
	n := 96 + len(km.ID) + len(km.InstanceID) + len(km.ClientID)
	for _, t := range km.Topics {
		n += len(t) + 3
	}
	for _, p := range km.Owned {
		n += len(p.Topic) + 36
	}
	return n
}

func memberTopics(mem *member) []string {
	if mem.pattern == nil {
		return slices.Sorted(slices.Values(mem.topics))
	}
	out := make([]string, 0, len(mem.resolved))
	for t, ok := range mem.resolved {
		if ok {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// ReadCost is how many items a read of group name walks: its
// partitions, and with members its members and the topics each
// subscribes to (KafkaView); 0 for an unknown group. The shell charges a
// tenant's group reads by it (tenant_groups.go).
func (m *Machine) ReadCost(name string, members bool) int {
	g := m.groupNamed(name)
	if g == nil {
		return 0
	}
	n := len(g.parts)
	if members {
		for _, mem := range g.members {
			n += 1 + len(mem.resolved)
		}
	}
	return n
}

// Owned is how many partitions member id of group name owns (what its
// rejoin fences); 0 for no such member.
func (m *Machine) Owned(name, id string) int {
	mem := m.memberOf(name, id)
	if mem == nil {
		return 0
	}
	n := 0
	for p := range mem.held {
		if o := p.owner(); o != nil && o.cap.holder.member(mem.id) {
			n++
		}
	}
	return n
}

// GroupsMatching lists at most limit group names after after, in order,
// that any of patterns allows (ocap grps entries: "*", "prefix*", or a
// name), and whether more follow. Each pattern is a binary search into
// the sorted names: names no pattern allows are never walked.
func (m *Machine) GroupsMatching(patterns []string, after string, limit int) ([]string, bool) {
	names := m.names // deleted groups' names too: skipped
	var out []string
	for _, pat := range patterns {
		prefix, isPrefix := strings.CutSuffix(pat, "*")
		start := max(after, prefix)
		i, found := slices.BinarySearch(names, start)
		if found && start == after {
			i++
		}
		for n := 0; i < len(names) && n <= limit; i++ {
			name := names[i]
			if isPrefix && !strings.HasPrefix(name, prefix) || !isPrefix && name != pat {
				break
			}
			if m.groups[name].deleted {
				continue
			}
			out = append(out, name)
			n++
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > limit {
		return out[:limit], true
	}
	return out, false
}
