package group

import (
	"fmt"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/topicpattern"
)

// What members can make the machine hold is bounded (Config.Limits):
// topics per join, the size of a topic pattern before and after its
// repetitions are expanded, members per group, groups per credential,
// groups, and the estimated bytes of all member, group and partition
// state and committed offsets' metadata. The estimate is what a join, and
// a commit whose metadata grows it, is refused on; its constants are at
// least the heap growth TestStateEstimateCoversTheHeap measures per item
// (limits_test.go), so the bound it enforces holds for the real heap.
const (
	memberBytes    = 2048                  // one member: struct, maps, session and heartbeat timers
	topicBytes     = 96                    // one topic a member lists or resolves: its entries in the member's and group's maps
	patternBytes   = 8192                  // a compiled topic pattern and its matcher caches, beyond the per-instruction cost
	patternInst    = 192                   // one unit of a pattern's cost (topicpattern.Cost): an instruction, or 16 of a character class's range bounds; each held in its parse tree, its program and the regexp (redteam18: 64 was half what [^a] or (?i)[a-z] held, a 12th of \pL's)
	partitionBytes = 1536                  // one (group, topic, partition)
	groupBytes     = 2048 + creatorNameMax // one group, and room for the creator name it may keep
)

// creatorNameMax bounds the creator name a group keeps (group.creatorName,
// counted in groupBytes): a longer subject is not kept, and describe
// shows the creator's id alone.
const creatorNameMax = 255

// tally is the machine's running estimate of the state limits bound.
type tally struct {
	groups        int64
	partitions    int64
	memberBytes   int64 // memberCost of every live member
	metadataBytes int64 // metadataCost of every partition's committed metadata
}

func (t *tally) bytes() int64 {
	return t.memberBytes + t.partitions*partitionBytes + t.groups*groupBytes + t.metadataBytes
}

// metadataCost estimates the heap a committed offset's metadata holds
// beyond its partition (partitionBytes): its bytes, and an eighth more
// for the allocator's size classes. It is kept for a group's partitions
// until the group is reaped (offsets_retention), after its members left,
// so a commit whose metadata grows the estimate is refused past
// limits.state_bytes as a join is.
func metadataCost(metadata string) int64 {
	return int64(len(metadata) + len(metadata)/8)
}

// setCommitted sets p's committed offset and metadata, keeping the
// machine's tally of metadata bytes.
func (p *partition) setCommitted(offset int64, metadata string, epoch uint64) {
	d := metadataCost(metadata) - metadataCost(p.metadata)
	p.group.tally.metadataBytes += d
	p.group.metadataBytes += d
	p.committed, p.metadata, p.committedEpoch = offset, metadata, epoch
	p.offsetKept = false
}

// stateBytes is g's own part of the state estimate: the group, its
// partitions and their committed metadata (its members count for their
// tenants: members_per_credential).
func (g *group) stateBytes() int64 {
	return groupBytes + int64(len(g.parts))*partitionBytes + g.metadataBytes
}

// A tenant's share of the state (limits.state_bytes_per_tenant): the
// groups it created that still exist, with their partitions and
// committed metadata, are charged to it, whoever joined or committed —
// as the groups it created are counted (groups_per_credential). Without
// it one tenant within its 100 groups could fill state_bytes alone with
// partitions and 4 KiB commit metadata (~32,000 partition commits), after
// which every other tenant's join and metadata-growing commit was 409
// (redteam11). A join into a group whose creator has used its share, and
// a commit growing such a group's metadata past it, are refused; groups
// of an admin (no creator) count for nobody.

//
// A tenant's live members count in its share too (Machine.memberBytes,
// whatever group they are in): members_per_credential bounds how many,
// not how large — a member listing topics_per_member topics of 249-byte
// names is ~345 KiB, so one tenant's ~570 such members filled
// state_bytes alone and every other tenant's join was refused
// (redteam14 #1).

// tenantStateBytes is the state estimate of the groups tenant created
// (at most groups_per_credential of them) and of its live members.
func (m *Machine) tenantStateBytes(tenant string) int64 {
	n := m.memberBytes[tenant]
	for g := range m.created[tenant] {
		n += g.stateBytes()
	}
	return n
}

// admitTenantState refuses a request that would take tenant's share past
// limits.state_bytes_per_tenant (more: what it adds to the share), or a
// growth past the state_bytes that would be left free beside it: a
// tenant never holds more than it leaves for the others, so with a few
// tenants at their full share (four at the defaults, 4 × 48 MiB = 192
// MiB) the state was full and every other tenant's join refused
// (redteam13 #3); now each newcomer finds room — the k-th large tenant
// is held to about what is left halved, and a small one (a group, a few
// partitions) is admitted while any room at all is left. A request that
// adds nothing to the tenant's share (a join into its existing group) is
// never refused by it, nor is any request when state_bytes_per_tenant is
// at least state_bytes (no shares: one tenant may fill the state).
//
// asker is the requester's tenant: a refusal names tenant, and what it
// holds, only to tenant itself. A join into or a commit to a group
// another tenant created is refused for that creator's share without
// its id or its usage — they named an OAuth client, a credential's jti
// or an IdP identity (an e-mail address, often) to any tenant allowed
// the group (redteam14 #5).
func (m *Machine) admitTenantState(ref Ref, what, tenant, asker string, more int64) bool {
	limit := min(m.cfg.Limits.StateBytesPerTenant, m.cfg.Limits.StateBytes)
	if tenant == "" {
		return true
	}
	used := m.tenantStateBytes(tenant)
	holds, details := fmt.Sprintf("tenant %q's live members and the groups it created hold %d bytes of the coordinator's state (members, partitions, committed metadata)", tenant, used),
		map[string]any{"tenant": tenant}
	if asker != tenant {
		holds, details = "the tenant that created this group holds its share of the coordinator's state with its members and groups (another tenant: an administrator can tell which)", map[string]any{}
	}
	if used+more > limit {
		hint := ""
		if what != "join" {
			hint = "commit with less or no metadata, or "
		}
		details["limit"], details["max"] = "coordinator.groups.limits.state_bytes_per_tenant", limit
		m.send(Rejected{Ref: ref, Code: api.CodeLimitExceeded,
			Message: fmt.Sprintf("%s: %s; %d more would pass coordinator.groups.limits.state_bytes_per_tenant (%d); room comes back as its members leave and its groups are reaped or deleted (%s); %sraise state_bytes_per_tenant",
				what, holds, more, limit, m.placesComeBack(), hint),
			Details: details})
		return false
	}
	if left := m.cfg.Limits.StateBytes - m.tally.bytes() - more; limit < m.cfg.Limits.StateBytes && more > 0 && used+more > left {
		details["limit"], details["max"] = "coordinator.groups.limits.state_bytes", m.cfg.Limits.StateBytes
		m.send(Rejected{Ref: ref, Code: api.CodeLimitExceeded,
			Message: fmt.Sprintf("%s: %s; %d more would leave %d of coordinator.groups.limits.state_bytes (%d) free: a tenant never holds more than the state left for others, "+
				"so a tenant with little is admitted however many hold much; room comes back as groups are reaped or deleted (%s), or raise state_bytes",
				what, holds, more, max(left, 0), m.cfg.Limits.StateBytes, m.placesComeBack()),
			Details: details})
		return false
	}
	return true
}

// holderTenant is the tenant of h, a member of g; "" for an outside
// holder (an administrator named it).
func (m *Machine) holderTenant(g *group, h holder) string {
	if mem := g.members[h.id]; !h.outside && mem != nil {
		return mem.credential.tenant()
	}
	return ""
}

// memberCost estimates the bytes mem holds.
func memberCost(mem *member) int64 {
	n := memberBytes + len(mem.id) + len(mem.instanceID) + len(mem.clientID) +
		len(mem.credential.ID) + len(mem.credential.Issuer) + len(mem.credential.Subject)
	for _, t := range mem.topics {
		n += topicBytes + len(t)
	}
	n += topicBytes * len(mem.resolved)
	if mem.pattern != nil {
		n += patternBytes + len(mem.patternText) + patternInst*mem.patternCost
	}
	return int64(n)
}

// A tenant's live members in all groups are bounded too
// (limits.members_per_credential, the same tenant as groups_per_credential
// counts: Credential.tenant, from Join.Tenant): members_per_group ×
// groups_per_credential is far more members than state_bytes holds, so
// without it one tenant could fill the state budget and every other
// tenant's join would be refused.

// credential is what the machine knows of one credential id: its live
// members (a deny of the id revokes them).
type credential struct {
	members map[*member]struct{}
}

// A group remembers the tenant whose join created it (group.creator,
// persisted in its GroupRecord), and a tenant may have created at most
// limits.groups_per_credential groups that still exist, besides having
// live members in at most as many (Machine.tenantGroups; a member keeps
// its tenant in Credential.Tenant, persisted with it, so the count is
// the same after a restore): without it one tenant
// could join, commit an offset and leave, group after group, until
// limits.groups refuses every new group to everyone. The tenant is the
// shell's Join.Tenant — the identity the holder cannot multiply (an OAuth
// client, not each credential it obtained; an IdP subject, not each of
// its tokens) — else the credential id. Deleting or reaping a group gives
// its creator the place back; groups of an admin, or recorded before
// creators were kept, count for nobody.

// creator is who a group e creates counts for: its tenant.
func (e Join) creator() string {
	if e.Tenant != "" {
		return e.Tenant
	}
	return e.Credential.ID
}

// creatorName is the name a group this join creates keeps beside its
// creator: the credential's subject, unless it is the creator id itself
// (an OAuth client's "oauth:<client_id>").
func (e Join) creatorName() string {
	if name := e.Credential.Subject; name != e.creator() {
		return name
	}
	return ""
}

// setCreator makes id (or nobody, "") g's creator, moving the place;
// name is its credential's name (Join.creatorName), kept only with an id
// and when at most creatorNameMax bytes (from a join or a store).
func (m *Machine) setCreator(g *group, id, name string) {
	if g.creator != "" {
		if delete(m.created[g.creator], g); len(m.created[g.creator]) == 0 {
			delete(m.created, g.creator)
		}
	}
	g.creator, g.creatorName = id, ""
	if id != "" {
		if m.created[id] == nil {
			m.created[id] = make(map[*group]struct{})
		}
		m.created[id][g] = struct{}{}
		if len(name) <= creatorNameMax {
			g.creatorName = name
		}
	}
}

// putGroup persists g's settings and creator.
func (m *Machine) putGroup(g *group) {
	m.putRecord(recordKey{kind: keyGroup, first: g.name}, GroupRecord{Group: g.name, Config: g.cfg, Creator: g.creator, CreatorName: g.creatorName})
}

// limitRejection is the refusal of a join past a count limit.
func (m *Machine) limitRejection(ref Ref, limit string, max int64, format string, args ...any) {
	m.send(Rejected{Ref: ref, Code: api.CodeLimitExceeded, Message: fmt.Sprintf(format, args...),
		Details: map[string]any{"limit": "coordinator.groups.limits." + limit, "max": max}})
}

// createdRejection is the refusal of a join that would create a group
// past the groups its tenant created that still exist; details name the
// tenant and say what was counted (the metrics tell it from the
// live-members refusal of the same limit by "counted").
func (m *Machine) createdRejection(ref Ref, tenant string, n int) {
	m.send(Rejected{Ref: ref, Code: api.CodeLimitExceeded,
		Message: fmt.Sprintf("join: the credential's tenant %q created %d groups that still exist (coordinator.groups.limits.groups_per_credential): %s",
			tenant, n, m.placesComeBack()),
		Details: map[string]any{"limit": "coordinator.groups.limits.groups_per_credential", "max": int64(m.cfg.Limits.GroupsPerCredential),
			"counted": CountedGroupsCreated, "tenant": tenant}})
}

// placesComeBack says how a tenant's created groups stop counting: the
// reaper forgets a group left empty (no members, leases or owned
// partitions, default settings) after empty_group_ttl, or after
// offsets_retention when it holds committed offsets (reapAfter), and an
// admin can delete one; a bound of 0 keeps such groups.
func (m *Machine) placesComeBack() string {
	after := func(d time.Duration, setting string) string {
		if d <= 0 {
			return "never (" + setting + " 0 keeps them)"
		}
		return fmt.Sprintf("%s after it is left empty (%s)", d, setting)
	}
	l := m.cfg.Limits
	return "a place comes back when one of them is forgotten — one without committed offsets " +
		after(l.EmptyGroupTTL, "coordinator.groups.limits.empty_group_ttl") + ", one holding committed offsets " +
		after(l.OffsetsRetention, "coordinator.groups.limits.offsets_retention") +
		" — or an admin deletes it (capgate admin group delete GROUP)"
}

// CountedGroupsCreated is the "counted" detail of a join refused because
// its tenant created limits.groups_per_credential groups that still
// exist.
const CountedGroupsCreated = "groups_created"

// admitJoin checks a join that adds a member (static replacements free
// their predecessor's place) against the count and state limits.
func (m *Machine) admitJoin(e Join, sub subscription, replaces *member) bool {
	l := m.cfg.Limits
	g := m.groups[e.Group]
	switch {
	case g == nil && int64(len(m.groups)) >= int64(l.Groups):
		m.limitRejection(e.Ref, "groups", int64(l.Groups), "join: the coordinator holds %d groups", len(m.groups))
		return false
	case g != nil && replaces == nil && len(g.members) >= l.MembersPerGroup:
		m.limitRejection(e.Ref, "members_per_group", int64(l.MembersPerGroup), "join: group %q has %d members", e.Group, len(g.members))
		return false
	}
	tenant := e.creator()
	if tenant != "" && m.groupNamed(e.Group) == nil && len(m.created[tenant]) >= l.GroupsPerCredential {
		m.createdRejection(e.Ref, tenant, len(m.created[tenant]))
		return false
	}
	if tg := m.tenantGroups[tenant]; tg != nil && (g == nil || tg[g] == 0) && len(tg) >= l.GroupsPerCredential {
		m.send(Rejected{Ref: e.Ref, Code: api.CodeLimitExceeded,
			Message: fmt.Sprintf("join: the credential's tenant %q has members in %d groups (coordinator.groups.limits.groups_per_credential): "+
				"a place comes back when its members of one of them leave or their sessions time out", tenant, len(tg)),
			Details: map[string]any{"limit": "coordinator.groups.limits.groups_per_credential", "max": int64(l.GroupsPerCredential),
				"tenant": tenant}})
		return false
	}
	if tenant != "" && (replaces == nil || replaces.credential.tenant() != tenant) {
		if n := m.tenantMembers(tenant); n >= l.MembersPerCredential {
			m.send(Rejected{Ref: e.Ref, Code: api.CodeLimitExceeded,
				Message: fmt.Sprintf("join: the credential's tenant %q has %d live members (coordinator.groups.limits.members_per_credential): "+
					"a place comes back when one of them leaves or its session times out", tenant, n),
				Details: map[string]any{"limit": "coordinator.groups.limits.members_per_credential", "max": int64(l.MembersPerCredential),
					"tenant": tenant}})
			return false
		}
	}
	if !m.admitState(e.Ref, "join", costOf(e, sub)) {
		return false
	}
	// The joining tenant pays for its member; the group's creator for
	// the group and the partitions this join's topics add to it: a new
	// group's room is asked of the joining tenant. (The partitions were
	// counted only once they existed, so a join asked nothing for them —
	// the one way a tenant grew its share at a join into its group.)
	own := costOf(e, sub)
	if replaces != nil && replaces.credential.tenant() == tenant {
		own -= replaces.charged
	}
	payer, more := tenant, int64(groupBytes)
	if g != nil {
		payer, more = g.creator, 0
	}
	more += m.partitionsAdded(g, sub)
	if payer == tenant {
		return m.admitTenantState(e.Ref, "join", tenant, tenant, own+more)
	}
	return m.admitTenantState(e.Ref, "join", tenant, tenant, own) && m.admitTenantState(e.Ref, "join", payer, tenant, more)
}

// admitResubscribe checks a rejoin changing mem's subscription to sub:
// the state its larger member adds (limits.state_bytes, and its tenant's
// share), and the partitions its new topics add to the group (its
// creator's share) — counted only once they existed, a tenant grew its
// groups past its share by rejoining with more topics (redteam14 #2).
func (m *Machine) admitResubscribe(e Join, mem *member, sub subscription) bool {
	more := costOf(e, sub) - mem.charged
	if more > 0 && !m.admitState(e.Ref, "join", more) {
		return false
	}
	tenant, payer, added := mem.credential.tenant(), mem.group.creator, m.partitionsAdded(mem.group, sub)
	if payer == tenant {
		return more+added <= 0 || m.admitTenantState(e.Ref, "join", tenant, tenant, more+added)
	}
	return (more <= 0 || m.admitTenantState(e.Ref, "join", tenant, tenant, more)) &&
		(added == 0 || m.admitTenantState(e.Ref, "join", payer, tenant, added))
}

// partitionsAdded estimates the partitions' bytes a join of sub adds to g
// (nil: a new group): those of the known topics it names or its pattern
// matches (sub.matches, matchesOf) that no member of g subscribes to yet.
func (m *Machine) partitionsAdded(g *group, sub subscription) int64 {
	var n int64
	add := func(t string) {
		if g == nil || g.subscribed[t] == 0 {
			n += int64(m.topics[t])
		}
	}
	topics := sub.topics
	if sub.pattern != nil {
		topics = sub.matches // matchesOf
	}
	for _, t := range topics {
		add(t)
	}
	return n * partitionBytes
}

// tenantMembers is how many live members tenant has in all groups
// (limits.members_per_credential bounds it; its groups are at most
// groups_per_credential, so the sum is short).
func (m *Machine) tenantMembers(tenant string) int {
	n := 0
	for _, k := range m.tenantGroups[tenant] {
		n += k
	}
	return n
}

// admitState refuses a request (a join, or a commit whose metadata grows
// the state) that would take the state estimate past limits.state_bytes;
// the message names the setting and what gives room back.
func (m *Machine) admitState(ref Ref, what string, more int64) bool {
	if used := m.tally.bytes(); used+more > m.cfg.Limits.StateBytes {
		hint := ""
		if what != "join" {
			hint = "commit with less or no metadata, or "
		}
		m.limitRejection(ref, "state_bytes", m.cfg.Limits.StateBytes,
			"%s: the coordinator's group state is full: %d bytes estimated (%d of them committed metadata), %d more would pass "+
				"coordinator.groups.limits.state_bytes (%d); room comes back as members leave and idle groups are reaped "+
				"(empty_group_ttl, offsets_retention) or deleted; %sraise state_bytes (and memory_limit with it)",
			what, used, m.tally.metadataBytes, more, m.cfg.Limits.StateBytes, hint)
		return false
	}
	return true
}

// costOf estimates the member a join would add.
func costOf(e Join, sub subscription) int64 {
	return memberCost(&member{id: e.MemberID, instanceID: e.InstanceID, clientID: e.ClientID, credential: e.Credential,
		topics: sub.topics, pattern: sub.pattern, patternText: sub.patternText, patternCost: sub.patternCost}) + 32
}

// checkPattern bounds a topic pattern before it is compiled: its length,
// and its size once every repetition is expanded beyond that length (the
// memory of its compiled program grows with it).
func (l Limits) checkPattern(pattern string) (cost int, err error) {
	if len(pattern) > l.TopicPatternBytes {
		return 0, fmt.Errorf("topic_pattern longer than %d bytes (coordinator.groups.limits.topic_pattern_bytes)", l.TopicPatternBytes)
	}
	cost = topicpattern.Cost(pattern)
	return cost, l.checkPatternCost(pattern, cost)
}

// checkPatternCost is checkPattern with pattern's cost worked out.
func (l Limits) checkPatternCost(pattern string, cost int) error {
	if len(pattern) > l.TopicPatternBytes {
		return fmt.Errorf("topic_pattern longer than %d bytes (coordinator.groups.limits.topic_pattern_bytes)", l.TopicPatternBytes)
	}
	// Bounded beyond its length (topicpattern.Expansion): the length is
	// bounded on its own, and a list of topic names written as an
	// alternation (`(orders|payments|…)`, 30 names ~450) costs about its
	// length; what the cost bounds is a short pattern expanding to a
	// large program — (.?){60}x, 9 bytes, cost 245. Its matching is
	// bounded by topic_pattern_steps; its memory is counted (memberCost).
	if over := cost - len(pattern); over > l.TopicPatternCost {
		return fmt.Errorf("topic_pattern too complex: %d instructions once expanded, %d more than its %d bytes, at most %d more (coordinator.groups.limits.topic_pattern_cost)",
			cost, over, len(pattern), l.TopicPatternCost)
	}
	return nil
}

// GroupsCreated is how many groups that still exist the tenant's joins
// created (Join.Tenant, else the credential id; limits.groups_per_credential
// bounds it).
func (m *Machine) GroupsCreated(tenant string) int {
	return len(m.created[tenant])
}
