package group

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/topicpattern"
	"github.com/capgate/capgate/revocation"
)

// subscription is a validated topic list or pattern.
type subscription struct {
	topics []string
	// pattern is patternText compiled for the step-counting matcher:
	// every match of it the machine makes is counted and bounded
	// (matchBounded).
	pattern     *topicpattern.Matcher
	patternText string
	// patternCost is topicpattern.Cost(patternText), worked out once: memberCost
	// runs on every charge and invariant check, and parsing the pattern
	// again each time was ~3% of a simulation run.
	patternCost int
	// matches: the topics the pattern matches among the machine's now,
	// sorted, once matched is set (matchesOf, topicnames.go).
	matches []string
	matched bool
}

// CompileTopicPattern compiles a join's topic_pattern as it is matched:
// against the whole topic name, as the Java consumer's subscribe(Pattern)
// — parsed alone, then anchored (topicpattern.Parse: a text closing the
// group of "^(?:"+text+")$" escaped its anchors).
func CompileTopicPattern(pattern string) (*regexp.Regexp, error) {
	re, err := topicpattern.Parse(pattern)
	if err != nil {
		return nil, err
	}
	return regexp.Compile(re.String())
}

func parseSubscription(topics []string, pattern string) (subscription, error) {
	switch {
	case len(topics) > 0 && pattern != "":
		return subscription{}, fmt.Errorf("set topics or topic_pattern, not both")
	case pattern != "":
		matcher, err := topicpattern.Compile(pattern)
		if err != nil {
			return subscription{}, fmt.Errorf("topic_pattern: %v", err)
		}
		return subscription{pattern: matcher, patternText: pattern, patternCost: topicpattern.Cost(pattern)}, nil
	case len(topics) == 0:
		return subscription{}, fmt.Errorf("topics or topic_pattern required")
	}
	sorted := slices.Clone(topics)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	if sorted[0] == "" {
		return subscription{}, fmt.Errorf("empty topic name")
	}
	return subscription{topics: sorted}, nil
}

func (s subscription) equal(mem *member) bool {
	return s.patternText == mem.patternText && slices.Equal(s.topics, mem.topics)
}

func (m *Machine) memberOf(groupName, id string) *member {
	if g := m.groups[groupName]; g != nil {
		return g.members[id]
	}
	return nil
}

func (m *Machine) join(e Join) {
	sub, timeout, err := m.checkJoin(e)
	if err != nil {
		m.reject(e.Ref, api.CodeBadRequest, "join: %v", err)
		return
	}
	if !e.ByMemberToken && m.credentialDenied(e.Credential.ID) {
		m.reject(e.Ref, api.CodeCapabilityRevoked, "join: the credential was revoked")
		return
	}
	if e.MemberID != "" {
		m.rejoin(e, sub, timeout, false)
		return
	}
	if mem := m.keyedMember(e); mem != nil {
		e.MemberID = mem.id // a repeat of the join that made mem
		m.rejoin(e, sub, timeout, true)
		return
	}
	var old *member
	if g := m.groups[e.Group]; g != nil {
		old = g.instances[e.InstanceID]
	}
	if old != nil && old.credential.ID != e.Credential.ID {
		m.reject(e.Ref, api.CodeConflict, "join: instance_id %q belongs to a member of another credential", e.InstanceID)
		return
	}
	if !m.admitPattern(e.Ref, e.creator(), sub, old) {
		return
	}
	if err := m.matchesOf(&sub, e.Matched); err != nil {
		m.reject(e.Ref, api.CodeBadRequest, "%v", err)
		return
	}
	if !m.admitJoin(e, sub, old) {
		return
	}
	creates := m.groupNamed(e.Group) == nil
	g := m.group(e.Group)
	if creates {
		m.setCreator(g, e.creator(), e.creatorName())
		m.putGroup(g)
	}
	if !m.adoptAssignor(g, e) {
		return
	}
	opened := old == nil && m.noteJoin(g, e)
	mem := m.addMember(g, e, sub, timeout)
	if old != nil {
		m.replaceStatic(old, mem)
	} else {
		m.queueReassign(g)
	}
	if opened {
		g.parkOpener(pendingJoin{ref: e.Ref, member: mem, created: true}) // window.go
		return
	}
	m.joins = append(m.joins, pendingJoin{ref: e.Ref, member: mem, created: true})
}

// credentialDenied reports whether id (a member's credential) is denied now.
func (m *Machine) credentialDenied(id string) bool {
	return m.revocations.DeniedAt(id, m.now)
}

// checkJoin validates a join and resolves its session timeout.
func (m *Machine) checkJoin(e Join) (subscription, time.Duration, error) {
	if e.Group == "" {
		return subscription{}, 0, fmt.Errorf("group required")
	}
	if l := m.cfg.Limits; len(e.Topics) > l.TopicsPerMember {
		return subscription{}, 0, fmt.Errorf("%d topics, at most %d (coordinator.groups.limits.topics_per_member)", len(e.Topics), l.TopicsPerMember)
	}
	sub, err := m.subscriptionOf(e)
	if err != nil {
		return subscription{}, 0, err
	}
	timeout := e.SessionTimeout
	if timeout == 0 {
		timeout = m.cfg.SessionTimeout
		if g := m.groups[e.Group]; g != nil {
			timeout = g.cfg.SessionTimeout
		}
	}
	if timeout < m.cfg.SessionTimeoutMin || timeout > m.cfg.SessionTimeoutMax {
		return subscription{}, 0, durationRangeError("session_timeout", timeout, m.cfg.SessionTimeoutMin, m.cfg.SessionTimeoutMax,
			"groups.session_timeout_min, groups.session_timeout_max")
	}
	if _, ok := m.lookup(e.Assignor); e.Assignor != "" && !ok {
		return subscription{}, 0, fmt.Errorf("unknown assignor %q", e.Assignor)
	}
	return sub, timeout, nil
}

// subscriptionOf checks and compiles a join's subscription: a pattern
// the join's Matched was made for (fromHint) is taken compiled, with its
// cost, as MatchTopics checked it — neither parsed nor compiled again in
// the loop.
func (m *Machine) subscriptionOf(e Join) (subscription, error) {
	if len(e.Topics) == 0 && m.fromHint(e.Matched, e.TopicPattern) {
		if err := m.cfg.Limits.checkPatternCost(e.TopicPattern, e.Matched.cost); err != nil {
			return subscription{}, err
		}
		return subscription{pattern: e.Matched.matcher, patternText: e.TopicPattern, patternCost: e.Matched.cost}, nil
	}
	if e.TopicPattern != "" {
		if _, err := m.cfg.Limits.checkPattern(e.TopicPattern); err != nil {
			return subscription{}, err
		}
	}
	return parseSubscription(e.Topics, e.TopicPattern)
}

// adoptAssignor checks the join's assignor against the group's; an empty
// group takes the join's.
func (m *Machine) adoptAssignor(g *group, e Join) bool {
	if e.Assignor == "" || e.Assignor == g.cfg.Assignor {
		return true
	}
	if len(g.members) > 0 {
		m.reject(e.Ref, api.CodeInconsistentAssign, "join: group %q uses assignor %q, not %q", g.name, g.cfg.Assignor, e.Assignor)
		return false
	}
	g.cfg.Assignor = e.Assignor
	m.putGroup(g)
	return true
}

// rejoin refreshes a known member bound to the join's credential (or
// named by its own member token): new subscription or session timeout,
// and every partition it owns fenced and granted to it again under a
// fresh epoch — unless the join renews it (Join.Renew: its member token
// was presented too; same subscription, no fence). A rejoin by anyone
// else is refused as for an unknown member, so a member id learnt from
// a capability's sub opens nothing. Keyed: the rejoin is a keyed join's
// repeat (keyedMember), which, as a renewal does, rebinds the member to
// another token of its OAuth client (sameClient).
func (m *Machine) rejoin(e Join, sub subscription, timeout time.Duration, keyed bool) {
	mem := m.memberOf(e.Group, e.MemberID)
	rebind := mem != nil && (e.Renew || keyed) && mem.credential.ID != e.Credential.ID &&
		(sameClient(mem.credential, e) || e.Renew && renewedByItsHolder(mem.credential, e))
	if mem == nil || (!e.ByMemberToken && mem.credential.ID != e.Credential.ID && !rebind) {
		m.reject(e.Ref, api.CodeUnknownMember, "join: unknown member %q: join without member_id", e.MemberID)
		return
	}
	if e.ByMemberToken && m.credentialDenied(mem.credential.ID) {
		m.reject(e.Ref, api.CodeCapabilityRevoked, "join: the member's credential was revoked")
		return
	}
	if e.ByMemberToken && !sub.equal(mem) {
		m.reject(e.Ref, api.CodeForbidden, "join: changing the subscription needs the client credential")
		return
	}
	if e.Renew && (e.ByMemberToken || !sub.equal(mem)) {
		m.reject(e.Ref, api.CodeBadRequest, "join: a renewal (renew_token) keeps the member's subscription and takes a client credential; rejoin without renew_token to change it")
		return
	}
	// A member whose pattern's match ran over the steps bound as topics
	// came (patternStale, topics.go) matches again when it rejoins.
	resubscribe := !sub.equal(mem) || mem.patternStale
	if resubscribe {
		if !m.admitPattern(e.Ref, mem.credential.tenant(), sub, mem) {
			return
		}
		if err := m.matchesOf(&sub, e.Matched); err != nil {
			m.reject(e.Ref, api.CodeBadRequest, "%v", err)
			return
		}
		if !m.admitResubscribe(e, mem, sub) {
			return
		}
	}
	if !m.adoptAssignor(mem.group, e) {
		return
	}
	m.contact(mem)
	if resubscribe {
		m.unresolve(mem)
		mem.patternStale, mem.patternUnrestored = false, false
		mem.topics, mem.pattern, mem.patternText, mem.patternCost = sub.topics, sub.pattern, sub.patternText, sub.patternCost
		m.resolve(mem, sub.matches)
		m.queueReassign(mem.group)
	}
	mem.sessionTimeout = timeout
	if rebind {
		m.rebind(mem, e.Credential)
	}
	m.putRecord(recordKey{kind: keyMember, first: mem.group.name, other: mem.id}, mem.record())
	if !e.Renew {
		m.refence(mem)
	}
	j := pendingJoin{ref: e.Ref, member: mem}
	if mem.parkedOpener() { // a keyed repeat of the join the window holds takes its place (window.go)
		j, mem.group.window.opener = mem.group.window.opener, j
	}
	m.joins = append(m.joins, j)
}

// sameClient reports whether a renewal's credential is another token of
// the OAuth client the member's is (Credential.Tenant, "oauth:<id>",
// set only for /oauth/token's credentials: each token its own jti, the
// client the one holder): then the renewal rebinds the member to it. An
// admin-minted credential is its own tenant (its jti), and an IdP
// identity's refreshed token has the same ID already, so neither is
// rebound.
func sameClient(c Credential, e Join) bool {
	return c.Tenant != "" && c.Tenant != c.ID && c.Tenant == e.Tenant
}

// renewedByItsHolder reports whether a renewal presented, beside its
// credential, the one the member is bound to (Join.RenewFrom, verified by
// the shell), of the same issuer and name: the bearer holds both, so the
// member's holder renews its credential by another — an admin-minted
// credential is its own tenant (its jti), and holding the member token
// alone does not change whom the member belongs to, but holding its
// credential does prove it. The renewal then rebinds the member to the
// new credential, counted for its old tenant, as an OAuth client's.
func renewedByItsHolder(c Credential, e Join) bool {
	return e.RenewFrom != "" && e.RenewFrom == c.ID && c.Issuer == e.Credential.Issuer && c.Subject == e.Credential.Subject
}

// rebind binds mem to credential c (a renewal's, sameClient or
// renewedByItsHolder): denying the old credential no longer ends mem,
// denying c does. The tenant stays mem's, so nothing it counts moves —
// its tenant(), not its Tenant field: an admin-minted credential's is
// empty (the credential is its own tenant), and copying that made the
// member the new credential's tenant, its counts left under the old one
// (TestRenewFromKeepsTheMembersTenant).
func (m *Machine) rebind(mem *member, c Credential) {
	m.unbindCredential(mem)
	c.Tenant = mem.credential.tenant()
	mem.credential = c
	m.bindCredential(mem)
	m.memberTenants.put(mem) // the same tenant, bound to c
}

// bindCredential counts mem among its credential's members (a deny of
// the credential ends them).
func (m *Machine) bindCredential(mem *member) {
	c := m.credentials[mem.credential.ID]
	if c == nil {
		c = &credential{members: make(map[*member]struct{})}
		m.credentials[mem.credential.ID] = c
	}
	c.members[mem] = struct{}{}
}

// unbindCredential undoes bindCredential.
func (m *Machine) unbindCredential(mem *member) {
	if c := m.credentials[mem.credential.ID]; c != nil {
		if delete(c.members, mem); len(c.members) == 0 {
			delete(m.credentials, mem.credential.ID)
		}
	}
}

// refence revokes every partition mem owns and grants it back to mem under
// a fresh epoch. The rejoin counts as the old incarnation's release, so
// the grant waits only for the gateways to apply the fence.
func (m *Machine) refence(mem *member) {
	for _, p := range heldSorted(mem) {
		if o := p.owner(); o != nil {
			o.givenUp = true
			m.startMove(p, holder{id: mem.id})
		}
	}
}

func (m *Machine) addMember(g *group, e Join, sub subscription, timeout time.Duration) *member {
	credential := e.Credential
	if t := e.creator(); t != credential.ID {
		credential.Tenant = t
	}
	id := keyedMemberID(e)
	if e.JoinKey == "" || !m.memberIDFree(g, id) {
		id = m.newMemberID(g, e.ClientID)
	}
	mem := &member{
		group:          g,
		id:             id,
		instanceID:     e.InstanceID,
		clientID:       e.ClientID,
		credential:     credential,
		topics:         sub.topics,
		pattern:        sub.pattern,
		patternText:    sub.patternText,
		patternCost:    sub.patternCost,
		sessionTimeout: timeout,
		held:           make(map[*partition]struct{}),
	}
	m.installMember(mem, sub.matches)
	return mem
}

// installMember adds mem to its group (also used by Restore); matches
// are the topics its pattern matches now (matchesOf).
func (m *Machine) installMember(mem *member, matches []string) {
	g := mem.group
	g.members[mem.id] = mem
	if mem.instanceID != "" {
		g.instances[mem.instanceID] = mem
	}
	m.bindCredential(mem)
	m.memberTenants.put(mem)
	tg := m.tenantGroups[mem.credential.tenant()]
	if tg == nil {
		tg = make(map[*group]int)
		m.tenantGroups[mem.credential.tenant()] = tg
	}
	tg[g]++
	m.resolve(mem, matches)
	m.contact(mem)
	m.putRecord(recordKey{kind: keyMember, first: g.name, other: mem.id}, mem.record())
}

// MemberIDMax is the longest member id the machine makes: a member id is
// a name (ocap.ValidName, 1-255 characters) — a capability's and a member
// token's sub, a path segment of the admin API.
const MemberIDMax = 255

// memberIDSuffix is the length of what follows a member id's prefix: "-"
// and 16 hex digits of the machine's rng.
const memberIDSuffix = 1 + 16

// newMemberID makes a member id of g: the client id (or "member"), cut to
// MemberIDMax - memberIDSuffix = 238 bytes, then "-" and 16 random hex
// digits. The cut keeps every id a name whatever the client id: a client
// id of 239-255 characters (a valid one) made ids of 256-272, which no
// token could carry (the join failed after the member existed) and no
// admin route could name. Client ids are printable ASCII (the shell
// checks them), so a byte cut is a character cut.
func (m *Machine) newMemberID(g *group, clientID string) string {
	prefix := memberIDPrefix(clientID)
	for {
		id := fmt.Sprintf("%s-%016x", prefix, m.rng.Uint64())
		if !g.isMember(id) {
			return id
		}
	}
}

// memberIDPrefix is what a member id of clientID starts with
// (newMemberID).
func memberIDPrefix(clientID string) string {
	prefix := clientID
	if prefix == "" {
		prefix = "member"
	}
	return prefix[:min(len(prefix), MemberIDMax-memberIDSuffix)]
}

// keyedMemberID is the id of the member a join with a key makes
// (Join.JoinKey): newMemberID's shape, its 16 hex digits the first 8
// bytes of SHA-256 over the group, the join's tenant (Join.creator: an
// OAuth client's "oauth:<client_id>", else the credential's id) and the
// key (each length-prefixed). A repeat of the join computes the same id
// and finds the member (keyedMember) — with another token of the same
// OAuth client too (a token refreshed between two attempts of one join:
// each /oauth/token credential is its own jti); another tenant's same
// key, or the key in another group, names another id. Member ids are not
// secrets (every capability's sub carries one), and the id tells nothing
// of the key.
func keyedMemberID(e Join) string {
	return KeyedMemberID(e.Group, e.creator(), e.ClientID, e.JoinKey)
}

// KeyedMemberID is keyedMemberID of a join into group by tenant (the
// shell's tenant of the joining credential) with clientID and key: the
// shell prices a keyed join by the member it may repeat (a repeat is
// that member's rejoin, which fences every partition it owns).
func KeyedMemberID(group, tenant, clientID, key string) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, s := range []string{group, tenant, key} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	return fmt.Sprintf("%s-%016x", memberIDPrefix(clientID), binary.BigEndian.Uint64(h.Sum(nil)))
}

// keyedMember is the live member an earlier attempt of keyed join e
// made, nil when there is none: the member of keyedMemberID(e), bound to
// e's credential or to another token of e's OAuth client (sameClient,
// what a renewal may rebind: the repeat rebinds it too, rejoin). A key
// is honoured as long as its member lives; once it left, expired or was
// revoked, a repeat makes a new member (under the same id, unless an
// administrator's revocation of that id still runs: memberIDFree). A
// key sent by another tenant never finds the member (another id, and
// the binding is checked besides), so no tenant reaches another's
// member with a key; an admin-minted credential is its own tenant, so
// another one, of the same name or not, never does either. A member
// whose credential is denied is not taken over (the deny ended it
// already: revokeOpenedBy; checked again so a token refreshed after a
// revoke never rebinds what the revoke was to end).
func (m *Machine) keyedMember(e Join) *member {
	if e.JoinKey == "" {
		return nil
	}
	mem := m.memberOf(e.Group, keyedMemberID(e))
	switch {
	case mem == nil, mem.credential.tenant() != e.creator(), m.credentialDenied(mem.credential.ID):
		return nil
	case mem.credential.ID != e.Credential.ID && !sameClient(mem.credential, e):
		return nil
	}
	return mem
}

// memberIDFree: a new member of g may take id — no live member has it,
// and no administrator's revocation of a member of that id still runs
// (the gateways refuse every capability of its sub until it lapses).
func (m *Machine) memberIDFree(g *group, id string) bool {
	_, revoked := m.revocations.RevokedUntil(revocation.MemberKey{Group: g.name, Member: id})
	return !g.isMember(id) && !revoked
}

// resolve computes the topics mem may be assigned — its topics, or
// matches, those its pattern matches now (matchesOf) — and counts them
// in the group.
func (m *Machine) resolve(mem *member, matches []string) {
	mem.resolved = make(map[string]bool)
	if mem.pattern == nil {
		matches = mem.topics
	}
	for _, t := range matches {
		mem.resolved[t] = true
	}
	for t := range mem.resolved {
		mem.group.subscribed[t]++
	}
	m.setMemberPattern(mem, true)
	m.recharge(mem)
}

// recharge brings mem's share of the state estimate up to date.
func (m *Machine) recharge(mem *member) {
	cost := memberCost(mem)
	m.tally.memberBytes += cost - mem.charged
	m.chargeTenant(mem.credential.tenant(), cost-mem.charged)
	mem.charged = cost
}

// chargeTenant adds delta to tenant's live members' bytes.
func (m *Machine) chargeTenant(tenant string, delta int64) {
	if m.memberBytes[tenant] += delta; m.memberBytes[tenant] == 0 {
		delete(m.memberBytes, tenant)
	}
}

func (m *Machine) unresolve(mem *member) {
	for t := range mem.resolved {
		if mem.group.subscribed[t]--; mem.group.subscribed[t] <= 0 {
			delete(mem.group.subscribed, t)
		}
	}
	mem.resolved = nil
	m.setMemberPattern(mem, false)
}

// replaceStatic hands old's partitions to its replacement under fresh
// epochs (fence, ack, grant) without touching anyone else.
func (m *Machine) replaceStatic(old, mem *member) {
	g := mem.group
	moved := heldSorted(old)
	sameSubscription := subscription{topics: mem.topics, patternText: mem.patternText}.equal(old)
	m.dropMember(old)
	for id, owner := range g.target {
		if owner == old.id {
			g.target[id] = mem.id
		}
	}
	for _, p := range g.order {
		if r := p.revocation(); r != nil && r.to.member(old.id) {
			m.retarget(p, holder{id: mem.id})
		}
	}
	for _, p := range moved {
		if p.state() == Owned {
			m.startMove(p, holder{id: mem.id})
		} else {
			m.tryComplete(p)
		}
	}
	if !sameSubscription {
		m.queueReassign(g)
	}
}

// removeMember drops mem; its partitions move without waiting for it.
func (m *Machine) removeMember(mem *member) {
	held := heldSorted(mem)
	m.dropMember(mem)
	for _, p := range held {
		m.tryComplete(p)
	}
	m.queueReassign(mem.group)
}

// dropMember takes mem out of its group; its partitions keep it as holder
// until they move.
func (m *Machine) dropMember(mem *member) {
	g := mem.group
	mem.removed = true
	delete(g.members, mem.id)
	if g.instances[mem.instanceID] == mem {
		delete(g.instances, mem.instanceID)
	}
	m.unbindCredential(mem)
	m.memberTenants.drop(mem)
	if tg := m.tenantGroups[mem.credential.tenant()]; tg != nil {
		if tg[g]--; tg[g] <= 0 {
			delete(tg, g)
		}
		if len(tg) == 0 {
			delete(m.tenantGroups, mem.credential.tenant())
		}
	}
	m.unresolve(mem)
	m.tally.memberBytes -= mem.charged
	m.chargeTenant(mem.credential.tenant(), -mem.charged)
	mem.charged = 0
	rec := mem.record()
	rec.Deleted = true
	m.putRecord(recordKey{kind: keyMember, first: g.name, other: mem.id}, rec)
	if mem.wait.held {
		m.unholdHeartbeat(mem)
		if mem.revoked {
			// Said, so that a client whose heartbeat had failed once
			// before does not take it for an expired session.
			m.rejectWith(mem.wait.ref, map[string]any{api.DetailRemoved: api.RemovedRevoked}, api.CodeUnknownMember,
				"member %q of group %q was revoked by an administrator", mem.id, g.name)
		} else {
			m.reject(mem.wait.ref, api.CodeUnknownMember, "member %q left group %q", mem.id, g.name)
		}
	}
	mem.news = news{}
	for _, p := range g.leased {
		if p.leaseWaiter != 0 && p.lease.holder == mem.id && !p.lease.outside {
			m.reject(p.leaseWaiter, api.CodeConflict, "lease holder %q left the group", mem.id)
			p.leaseWaiter = 0
		}
	}
}

func heldSorted(mem *member) []*partition {
	held := make([]*partition, 0, len(mem.held))
	for p := range mem.held {
		held = append(held, p)
	}
	slices.SortFunc(held, func(a, b *partition) int { return comparePartitions(a.id, b.id) })
	return held
}

func (m *Machine) leave(e Leave) {
	mem := m.memberOf(e.Group, e.MemberID)
	if mem == nil {
		m.reject(e.Ref, api.CodeUnknownMember, "leave: unknown member %q", e.MemberID)
		return
	}
	if !m.commitOffsets(e.Ref, mem.group, holder{id: mem.id}, e.Offsets, true) {
		return
	}
	m.removeMember(mem)
	m.send(LeaveReply{Ref: e.Ref})
}

// undoJoin takes out a member whose join could not be answered
// (UndoJoin).
func (m *Machine) undoJoin(e UndoJoin) {
	mem := m.memberOf(e.Group, e.MemberID)
	if mem == nil {
		m.reject(e.Ref, api.CodeUnknownMember, "undo join: unknown member %q", e.MemberID)
		return
	}
	m.removeMember(mem)
	m.send(Done{Ref: e.Ref})
}

// contact records that mem was heard from.
func (m *Machine) contact(mem *member) {
	mem.lastContact = m.now
	if !mem.sessionArmed {
		mem.sessionArmed = true
		m.push(timer{at: m.now.Add(mem.sessionTimeout), kind: timerSession, member: mem})
	}
}

func (m *Machine) onSessionTimer(mem *member) {
	mem.sessionArmed = false
	if mem.removed || mem.wait.held {
		return // a held heartbeat is not silence; unpark re-arms
	}
	if mem.parkedOpener() {
		mem.lastContact = m.now // nor is a join answer the window holds (window.go)
	}
	deadline := mem.lastContact.Add(mem.sessionTimeout)
	if m.now.Before(deadline) {
		mem.sessionArmed = true
		m.push(timer{at: deadline, kind: timerSession, member: mem})
		return
	}
	m.removeMember(mem)
}

func (m *Machine) heartbeat(e Heartbeat) {
	mem := m.memberOf(e.Group, e.MemberID)
	if mem == nil {
		m.reject(e.Ref, api.CodeUnknownMember, "heartbeat: unknown member %q", e.MemberID)
		return
	}
	if mem.patternUnrestored {
		m.heartbeatUnrestored(mem, e.Ref)
		return
	}
	m.contact(mem)
	m.renew(mem)
	if mem.wait.held {
		m.send(News{Ref: mem.wait.ref, Group: mem.group.name, MemberID: mem.id})
	}
	if e.Resync || mem.resyncDue {
		m.resyncAtMostEvery(mem)
	}
	wait := e.Wait
	if wait <= 0 || wait > m.cfg.HeartbeatWait {
		wait = m.cfg.HeartbeatWait
	}
	if !mem.wait.held && m.heldHeartbeats[mem.credential.tenant()] >= m.cfg.Limits.HeldHeartbeatsPerTenant {
		m.heartbeatNotHeld(mem, e.Ref)
		return
	}
	until := m.now.Add(wait)
	if nb := mem.news.notBefore; !mem.news.empty() && nb.After(m.now) && nb.Before(until) {
		until = nb // the token its news waits for (DeferNews)
	}
	m.holdHeartbeat(mem, e.Ref, until)
	m.queueNews(mem)
}

// heartbeatUnrestored answers the heartbeat of a member a restore did
// not match (member.patternUnrestored) with 409 unknown_member, its
// details' removed topic_pattern_unrestored, and removes it — its
// partitions move without waiting for it, as a leave's. The answer every
// client acts on, the SDK and the Kafka listener (UNKNOWN_MEMBER_ID)
// alike: join again. A join matches the pattern outside the loop, paid
// by the tenant, one at a time (coordinator/patterns.go), where a
// restore matches each tenant's patterns within
// restorePatternBudget × topic_pattern_steps before the coordinator
// serves anyone.
func (m *Machine) heartbeatUnrestored(mem *member, ref Ref) {
	m.removeMember(mem)
	m.rejectWith(ref, map[string]any{api.DetailRemoved: api.RemovedPatternUnrestored, "limit": TopicPatternStepsLimit},
		api.CodeUnknownMember, "heartbeat: member %q of group %q was restored (the coordinator restarted or took over) without its topic_pattern's topics: "+
			"its tenant's patterns took more than a restore matches (%d × %s) or the pattern no longer parses; join again: a join matches it",
		mem.id, mem.group.name, restorePatternBudget, TopicPatternStepsLimit)
}

// holdHeartbeat holds mem's heartbeat ref until `until` (or its news),
// counted for its tenant (limits.held_heartbeats_per_tenant).
func (m *Machine) holdHeartbeat(mem *member, ref Ref, until time.Time) {
	if !mem.wait.held {
		m.heldHeartbeats[mem.credential.tenant()]++
	}
	if mem.wait.park(ref, until) {
		m.push(timer{at: mem.wait.until, kind: timerHeartbeat, member: mem})
	}
}

// unholdHeartbeat ends mem's held heartbeat (answered or refused by the
// caller) and uncounts it.
func (m *Machine) unholdHeartbeat(mem *member) {
	mem.wait.held = false
	tenant := mem.credential.tenant()
	if m.heldHeartbeats[tenant]--; m.heldHeartbeats[tenant] <= 0 {
		delete(m.heldHeartbeats, tenant)
	}
}

// heartbeatNotHeld answers the heartbeat ref of mem, whose tenant holds
// limits.held_heartbeats_per_tenant heartbeats already, at once: its
// news when it has some (a revoke, grants, renewals due), else 429
// rate_limited saying when to come back — before the session would end,
// at most heartbeat_wait. It was heard from (contact and renewals ran).
// One tenant's members long-polling held a connection each for the
// price of one request per heartbeat_wait and could take every
// coordinator.max_connections slot from the other tenants (redteam12 #2).
func (m *Machine) heartbeatNotHeld(mem *member, ref Ref) {
	if m.newsDue(mem) {
		m.holdHeartbeat(mem, ref, m.now)
		m.answerHeartbeat(mem)
		return
	}
	l := m.cfg.Limits.HeldHeartbeatsPerTenant
	retry := max(min(m.cfg.HeartbeatWait, mem.sessionTimeout/3), time.Millisecond)
	m.rejectWith(ref, map[string]any{"limit": "coordinator.groups.limits.held_heartbeats_per_tenant", "max": int64(l),
		"tenant": mem.credential.tenant(), "retry_after_ms": retry.Milliseconds()}, api.CodeRateLimited,
		"heartbeat: the credential's tenant has %d heartbeats held (coordinator.groups.limits.held_heartbeats_per_tenant); "+
			"this one is answered at once: heartbeat again after retry_after_ms", l)
}

func (m *Machine) onHeartbeatTimer(mem *member) {
	due, rearm := mem.wait.fire(m.now)
	switch {
	case mem.removed:
	case rearm:
		m.push(timer{at: mem.wait.until, kind: timerHeartbeat, member: mem})
	case due:
		m.answerHeartbeat(mem)
	}
}

// flushNews answers mem's held heartbeat if it has news due.
func (m *Machine) flushNews(mem *member) {
	if mem.wait.held && !mem.removed && m.newsDue(mem) {
		m.answerHeartbeat(mem)
	}
}

// newsDue: mem has news its heartbeat carries now — a revoke at once,
// grants and renewals once the token they wait for is the tenant's
// (news.notBefore, DeferNews).
func (m *Machine) newsDue(mem *member) bool {
	return !mem.news.empty() && (len(mem.news.revoke) > 0 || !m.now.Before(mem.news.notBefore))
}

// answerHeartbeat answers mem's held heartbeat with its news, or empty
// (the news kept) when none is due.
func (m *Machine) answerHeartbeat(mem *member) {
	if !m.newsDue(mem) {
		m.send(News{Ref: mem.wait.ref, Group: mem.group.name, MemberID: mem.id})
		m.unholdHeartbeat(mem)
		m.contact(mem)
		return
	}
	n := mem.news
	mem.news = news{}
	slices.SortFunc(n.revoke, func(a, b api.PartitionRef) int {
		return cmpTopicPartition(a.Topic, a.Partition, b.Topic, b.Partition)
	})
	m.send(News{
		Ref: mem.wait.ref, Group: mem.group.name, MemberID: mem.id, Revoke: n.revoke,
		Grants: m.renderGrants(mem, n.grants), Renew: m.renderGrants(mem, n.renew), Paid: n.paid,
	})
	m.unholdHeartbeat(mem)
	m.contact(mem)
}

// renderGrants describes the member's current capabilities for the given
// partitions, sorted.
func (m *Machine) renderGrants(mem *member, set map[*partition]struct{}) []Grant {
	if len(set) == 0 {
		return nil
	}
	parts := make([]*partition, 0, len(set))
	for p := range set {
		if o := p.owner(); o != nil && o.cap.holder.member(mem.id) {
			parts = append(parts, p)
		}
	}
	slices.SortFunc(parts, func(a, b *partition) int { return comparePartitions(a.id, b.id) })
	grants := make([]Grant, len(parts))
	for i, p := range parts {
		o := p.owner()
		o.cap.sent = true
		grants[i] = m.grantOf(p)
		o.cap.handOut(&grants[i])
	}
	return grants
}

func cmpTopicPartition(at string, ap int32, bt string, bp int32) int {
	if c := strings.Compare(at, bt); c != 0 {
		return c
	}
	return int(ap) - int(bp)
}

// extend renews p's capability when less than half the lease is left.
func (m *Machine) extend(p *partition) bool {
	o := p.owner()
	if o == nil || o.cap.expiry.Sub(m.now) >= m.cfg.CapabilityLease/2 {
		return false
	}
	exp := m.expiry(m.cfg.CapabilityLease)
	if !exp.After(o.cap.expiry) {
		return false
	}
	o.cap.renew(exp)
	return true
}

// renew queues renewals for mem's owned partitions that need one. A grant
// not yet delivered is refreshed in place.
func (m *Machine) renew(mem *member) {
	for p := range mem.held {
		if !m.extend(p) {
			continue
		}
		m.audit.renewed(p, m.grantOf(p))
		mem.news.addRenewal(p)
	}
}

// replyJoin answers a join with every partition the member owns now.
func (m *Machine) replyJoin(j pendingJoin) {
	mem := j.member
	// A join the window held (window.go) can see its member go before its
	// answer. Its credential denied meanwhile: said so, as every later
	// request of the member would be told, not a bare "removed" a client
	// takes for a rebalance to rejoin after. Revoked by an administrator
	// (an operator acting on the member a describe already lists):
	// answered as it would have been had the answer left first — the
	// member, no grants — so the client learns of the revocation where it
	// always does, at its next heartbeat, and joins again, as Kafka clients
	// do after a removal; a "removed" join answer ended a consumer still
	// starting (capgate consume exited).
	switch {
	case mem.removed && m.credentialDenied(mem.credential.ID):
		m.reject(j.ref, api.CodeCapabilityRevoked, "join: the credential was revoked (token denied by an administrator) while the join waited for its group's first assignment")
		return
	case mem.removed && !mem.revoked:
		m.reject(j.ref, api.CodeUnknownMember, "join: member %q was removed", mem.id)
		return
	}
	reply := JoinReply{
		Ref: j.ref, Group: mem.group.name, MemberID: mem.id, Created: j.created,
		SessionTimeout: mem.sessionTimeout, HeartbeatWait: m.cfg.HeartbeatWait,
	}
	var held []*partition
	if !mem.removed {
		held = heldSorted(mem)
	}
	for _, p := range held {
		o := p.owner()
		if o == nil {
			continue
		}
		mem.news.drop(p)
		m.extend(p)
		g := m.grantOf(p)
		m.audit.renewed(p, g)
		o.cap.sent = true
		o.cap.handOut(&g)
		reply.Grants = append(reply.Grants, g)
	}
	m.send(reply)
}
