package kafkaproto

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/client/session"
)

// groups holds the group members this gateway runs capgate sessions for,
// by Kafka member id and by the client keys their fetches arrive under.
type groups struct {
	s   *Server
	api *client.GroupAPI

	mu    sync.Mutex
	byID  map[memberRef]*member
	byKey map[clientKey][]*member
	// keys are the client keys each registered member is reachable by
	// (its entries in byKey), oldest first: the one it was opened under
	// (member.key), then those connections of its keys re-authenticated
	// into (carryOver), at most maxMemberKeys.
	keys map[*member][]clientKey
	// byHolder counts the registered members by their holder
	// (member.holder): what pauses a fetch of a connection opened with a
	// renewed credential before the carry-over (renewalPending).
	byHolder map[holderKey]int
	// byTenant counts each tenant's members (clientKey.tenant of the key
	// each was opened under), those joining included: a place is taken
	// before the coordinator is asked, so a tenant's joins in flight
	// cannot pass kafka_max_members_per_tenant together.
	byTenant map[string]int
	// lentBy counts each tenant's members whose place is lent to another
	// tenant's join in flight (placeLent): still running, and given
	// their place back if that join fails, so takePlace counts them
	// against kafka_max_members_per_tenant — else a tenant could fill
	// the place its lent member left in byTenant and be over its cap
	// once the place came back (review25 #1).
	lentBy map[string]int
	// places is the sum of byTenant: the places taken, joins in flight
	// included (kafka_max_members bounds it).
	places int
	// placed counts registrations: member.placed, what tells the newest
	// member of a tenant (fairShareLocked).
	placed uint64
	// evictedAt is when each tenant last took a place by eviction (a
	// lend, paceLocked): one a kafka_member_eviction_interval, so a
	// tenant churning joins (join, leave, join) cannot close another
	// tenant's members again and again (review25 #3). Entries older than
	// the interval go when it is full (evictionTenantsMax).
	evictedAt map[string]time.Time
	// pauses are the credentials (by holder and id) whose connections' fetches
	// paused as a renewal pending (renewalPending), each with the end
	// of its one window; at most renewalPausesMax.
	pauses map[pauseKey]renewalPause
	// pauseMax bounds one window (0: the credential's expiry alone):
	// kafka_reauth_max, within which every connection of the client
	// re-authenticates, and request_timeout, within which the group
	// connection's carry-over is done.
	pauseMax time.Duration
}

// pauseKey is a credential (its id) as one holder's connections present
// it: a credential shared by several clients (KafkaJS processes reading
// one token file) pauses in each one's window.
type pauseKey struct {
	holder holderKey
	cred   string
}

// renewalPause is one credential's window of paused fetches, ending at
// its own expiry (the entry is dropped after it).
type renewalPause struct{ until time.Time }

// renewalPausesMax bounds groups.pauses; full (of credentials still
// live), a connection of yet another credential is refused as before the
// relaxation.
const renewalPausesMax = 4096

// holderKey is a client key as a renewal of its credential keeps it: the
// credential's issuer and subject (its name), not its holder (an
// admin-minted credential's own id, which each renewal changes), with
// the client.id and address. Two holders' credentials may share a name,
// so it reaches no member (clientKey does); it only tells a connection
// whose key reaches none that one of its name is there.
type holderKey struct {
	issuer, subject, clientID, ip string
}

// maxMemberKeys bounds the client keys one member is reachable by. Only
// a re-authentication with another credential of the same name (an
// admin-minted credential renewed by a new one) adds a key, so a member
// needs one per credential still in use on some connection of its
// client: each connection re-authenticates before its credential expires.
// Past the bound the oldest key (the longest-renewed credential's) goes.
const maxMemberKeys = 8

type memberRef struct{ group, id string }

func newGroups(s *Server) *groups {
	return &groups{
		s: s, api: client.NewGroupAPI(s.cfg.CoordinatorURL, s.cfg.CoordinatorTLS, s.cfg.CoordinatorConnectionsMax),
		byID: map[memberRef]*member{}, byKey: map[clientKey][]*member{},
		keys: map[*member][]clientKey{}, byHolder: map[holderKey]int{},
		byTenant: map[string]int{}, pauses: map[pauseKey]renewalPause{}, pauseMax: s.cfg.ReauthMax + s.cfg.RequestTimeout,
	}
}

// evictionTenantsMax bounds groups.evictedAt; full of tenants that
// evicted within the interval, a join needing an eviction is paced.
const evictionTenantsMax = 4096

// errTooManyMembers refuses a join beyond kafka_max_members, and
// errTooManyTenantMembers one beyond its tenant's
// kafka_max_members_per_tenant: limit_exceeded, GROUP_MAX_SIZE_REACHED to
// the client (final, as Kafka's group.max.size). errEvictionPaced
// refuses one that would evict a member while its tenant evicted one
// within kafka_member_eviction_interval: rate_limited,
// COORDINATOR_NOT_AVAILABLE (retriable: the client joins again later).
var (
	errTooManyMembers       = errors.New("kafkaproto: kafka_max_members reached")
	errTooManyTenantMembers = errors.New("kafkaproto: kafka_max_members_per_tenant reached")
	errEvictionPaced        = errors.New("kafkaproto: kafka_max_members reached and this tenant took a place by eviction within kafka_member_eviction_interval: join again later")
)

// placeState is what became of a registered member's place.
type placeState uint8

const (
	placeHeld placeState = iota // it holds it (or is not registered)
	// placeLent: lent to another tenant's join in flight, which closes
	// the member once answered (evict); given back if that join fails.
	placeLent
	// placePassed: passed to a join of its own client with its own member
	// id (a KIP-848 rejoin while it closes): that member takes its place
	// over, no other is evicted; given back if that join fails.
	placePassed
)

// taking is the place a join took: a free one (from nil), or the place
// of a member lent (evicts) or passed on to it; at is when a lend was
// paced (paceLocked) and paced the time it replaced, restored when the
// join fails.
type taking struct {
	from      *member
	evicts    bool
	at, paced time.Time
}

// join joins the coordinator for a new Kafka member (with the client's
// credential) and registers it.
func (g *groups) join(ctx context.Context, m *member, credential string, req api.JoinRequest) (api.Code, error) {
	place, err := g.takePlace(m, time.Now())
	if errors.Is(err, errEvictionPaced) {
		return api.CodeRateLimited, err
	} else if err != nil {
		return api.CodeLimitExceeded, err
	}
	m.credential = credential
	m.log = g.s.log.With(zap.String("group", m.group), zap.String("client_id", loggedClientID(m.key.clientID)))
	if err := m.start(ctx, req); err != nil {
		g.mu.Lock()
		g.giveBackLocked(m.key.tenant, place)
		g.mu.Unlock()
		return client.CodeOf(err), fmt.Errorf("kafkaproto: join %s: %w", m.group, err)
	}
	if place.evicts {
		g.evict(place.from, m.key.tenant)
	}
	m.mu.Lock()
	capgateID := m.sess.Member().ID
	if m.id == "" {
		m.id = capgateID
	}
	m.log = m.log.With(zap.String("member", m.id), zap.String("capgate_member", capgateID))
	grants := len(m.sess.Assigned())
	m.mu.Unlock()
	g.mu.Lock()
	ref := memberRef{m.group, m.id}
	old := g.byID[ref]
	g.byID[ref] = m
	g.byKey[m.key] = append(g.byKey[m.key], m)
	g.keys[m] = []clientKey{m.key}
	g.placed++
	m.placed = g.placed
	if g.byHolder == nil {
		g.byHolder, g.pauses = map[holderKey]int{}, map[pauseKey]renewalPause{}
	}
	g.byHolder[m.holder]++
	g.mu.Unlock()
	if old != nil {
		old.close()
	}
	m.log.Info("kafka member joined", zap.Bool("kip848", m.kip848), zap.Int("grants", grants))
	return "", nil
}

// takePlace takes a place for m's join at now, or refuses: m's tenant
// holds kafka_max_members_per_tenant, or the gateway kafka_max_members
// and no tenant holds more than its fair share (fairShareLocked), or one
// does but m's tenant evicted a member within
// kafka_member_eviction_interval (paceLocked). When the gateway is full
// and one does, its newest registered member lends m's tenant its place
// (evicts): it is closed once the join succeeded (evict), and gets its
// place back if the join fails (giveBackLocked), so a join the
// coordinator refuses evicts nobody. A join replacing a member of its
// own client (passedLocked) takes that member's place over instead,
// whatever the bounds: it holds one place, as before.
func (g *groups) takePlace(m *member, now time.Time) (taking, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byTenant == nil {
		g.byTenant = map[string]int{}
	}
	if old := g.passedLocked(m); old != nil {
		return taking{from: old}, nil
	}
	tenant := m.key.tenant
	if g.s.cfg.MaxMembersPerTenant > 0 && g.byTenant[tenant]+g.lentBy[tenant] >= g.s.cfg.MaxMembersPerTenant {
		return taking{}, errTooManyTenantMembers
	}
	var place taking
	if g.places >= g.s.cfg.MaxMembers {
		lender := g.fairShareLocked(tenant)
		if lender == nil {
			return taking{}, errTooManyMembers
		}
		paced, ok := g.paceLocked(tenant, now)
		if !ok {
			g.s.membersEvictionsPaced.Add(1)
			return taking{}, errEvictionPaced
		}
		place = taking{from: lender, evicts: true, at: now, paced: paced}
		g.markPlaceLocked(lender, placeLent)
		g.leavePlaceLocked(lender.key.tenant)
	}
	g.byTenant[tenant]++
	g.places++
	return place, nil
}

// passedLocked passes m the place of the registered member its join
// replaces, if any: the same group and Kafka member id, reachable by m's
// client key and opened by its tenant, holding its place — a KIP-848
// client's rejoin at epoch 0 with its member id while that member is
// closing (its session timed out, it left; rejoin848 takes only an
// active one) or is gone and not yet removed. Else nil. Before, such a
// join took a second place: at kafka_max_members it evicted another
// tenant's member for a place freed moments later, and at its tenant's
// kafka_max_members_per_tenant it was refused GROUP_MAX_SIZE_REACHED,
// final to Kafka clients (review25 #2).
func (g *groups) passedLocked(m *member) *member {
	if m.id == "" {
		return nil
	}
	old := g.byID[memberRef{m.group, m.id}]
	if old == nil || old.place != placeHeld || old.key.tenant != m.key.tenant || !slices.Contains(g.keys[old], m.key) {
		return nil
	}
	g.markPlaceLocked(old, placePassed)
	return old
}

// giveBackLocked undoes the place a join of tenant took (the join
// failed): a lent or passed one goes back to its member unless it left
// meanwhile (remove: its place was counted gone), and a lend's pacing is
// undone — a join the coordinator refused evicted nobody.
func (g *groups) giveBackLocked(tenant string, place taking) {
	from := place.from
	if from != nil && from.place == placePassed {
		g.markPlaceLocked(from, placeHeld) // the place it passed on is its own again
		return
	}
	g.leavePlaceLocked(tenant)
	if place.evicts {
		g.unlendLocked(from)
		if at, ok := g.evictedAt[tenant]; ok && at.Equal(place.at) {
			if place.paced.IsZero() {
				delete(g.evictedAt, tenant)
			} else {
				g.evictedAt[tenant] = place.paced
			}
		}
	}
}

// paceLocked reports whether tenant may take a place by eviction at now:
// it took none within kafka_member_eviction_interval (0: always), and
// records now (paced: the time it replaced). A join that evicted is
// enough for a tenant to have its share: a tenant joining, leaving and
// joining again closed another tenant's member at each join, nothing
// bounding how often (review25 #3); a legitimate newcomer's members take
// their places one an interval, retrying as for a coordinator moving.
func (g *groups) paceLocked(tenant string, now time.Time) (paced time.Time, ok bool) {
	every := g.s.cfg.MemberEvictionInterval
	if every <= 0 {
		return time.Time{}, true
	}
	paced, had := g.evictedAt[tenant]
	if had && now.Sub(paced) < every {
		return paced, false
	}
	if g.evictedAt == nil {
		g.evictedAt = map[string]time.Time{}
	}
	if !had && len(g.evictedAt) >= evictionTenantsMax {
		maps.DeleteFunc(g.evictedAt, func(_ string, at time.Time) bool { return now.Sub(at) >= every })
		if len(g.evictedAt) >= evictionTenantsMax {
			return time.Time{}, false
		}
	}
	g.evictedAt[tenant] = now
	return paced, true
}

// fairShareLocked picks the member whose place a join of tenant takes
// while every kafka_max_members place is taken: the newest registered
// member (not lending already) of the tenant holding the most places,
// when that tenant holds more than tenant's places + 1 and more than its
// fair share — kafka_max_members over the tenants holding places, tenant
// included. Else nil: the join is refused. The connections' fair share
// (Server.fairShareLocked) in members: without it four tenants at
// kafka_max_members_per_tenant (4 × 2,500 = 10,000 at the defaults)
// held every place and a fifth tenant's consumers were refused
// GROUP_MAX_SIZE_REACHED, final to Kafka clients (redteam19 #4, left).
// The share, not only the +1, bounds what a tenant joining and leaving
// over and over can take from the others: no tenant is brought below
// kafka_max_members over the tenants, and a place freed by a leave is
// taken without evicting anyone.
func (g *groups) fairShareLocked(tenant string) *member {
	most := ""
	for t, n := range g.byTenant {
		if n > g.byTenant[most] || n == g.byTenant[most] && t < most {
			most = t
		}
	}
	tenants := len(g.byTenant)
	if g.byTenant[tenant] == 0 {
		tenants++
	}
	held := g.byTenant[most]
	if most == tenant || held <= g.byTenant[tenant]+1 || held*tenants <= g.s.cfg.MaxMembers {
		return nil
	}
	var newest *member
	for m := range g.keys { // the registered members
		if m.key.tenant == most && m.place == placeHeld && (newest == nil || m.placed > newest.placed) {
			newest = m
		}
	}
	return newest
}

// unlendLocked gives lender its place back after the join it was lent to
// failed, unless it left meanwhile (remove: its place was counted gone).
func (g *groups) unlendLocked(lender *member) {
	if lender == nil || lender.place != placeLent {
		return
	}
	g.markPlaceLocked(lender, placeHeld)
	if _, registered := g.keys[lender]; registered {
		g.byTenant[lender.key.tenant]++
		g.places++
	}
}

// markPlaceLocked sets m.place and keeps lentBy its tenant's count of
// lent places.
func (g *groups) markPlaceLocked(m *member, place placeState) {
	if m.place == place {
		return
	}
	if g.lentBy == nil {
		g.lentBy = map[string]int{}
	}
	t := m.key.tenant
	switch {
	case place == placeLent:
		g.lentBy[t]++
	case m.place == placeLent:
		if g.lentBy[t]--; g.lentBy[t] <= 0 {
			delete(g.lentBy, t)
		}
	}
	m.place = place
}

// evict closes lender, whose place a member of tenant took: the session
// releases its partitions at the client's committed offsets and leaves,
// as for a client gone silent, so the coordinator hands them on fenced
// (nothing is read twice at once); its client is told UNKNOWN_MEMBER_ID
// and, joining again while the gateway is full, GROUP_MAX_SIZE_REACHED.
func (g *groups) evict(lender *member, tenant string) {
	g.mu.Lock()
	held, others := g.byTenant[lender.key.tenant], g.byTenant[tenant]
	g.mu.Unlock()
	g.s.membersEvicted.Add(1)
	lender.log.Warn("kafka member closed for another tenant's: kafka_max_members reached and its tenant holds the most, over its fair share",
		zap.Int("tenant_members", held), zap.Int("other_tenant_members", others), zap.Int("kafka_max_members", g.s.cfg.MaxMembers))
	lender.close()
}

// leavePlaceLocked gives a place of tenant's back (a join that failed, a
// registered member removed, a place lent).
func (g *groups) leavePlaceLocked(tenant string) {
	g.places--
	if n := g.byTenant[tenant]; n <= 1 {
		delete(g.byTenant, tenant)
	} else {
		g.byTenant[tenant] = n - 1
	}
}

// carryOver hands a re-authenticated connection's new credential to every
// member its client key was reaching (from: the key of the credential it
// authenticated with before) and makes them reachable by its new key
// (to) as well: the connection proved it holds both credentials, and the
// client's other connections still on the old one keep their members
// until they re-authenticate too. Only the connection's own members move:
// another holder's credential of the same name has another key
// (Principal.tenant). The members' sessions take the new credential
// (member.carryOver) in the background: the SASL answer does not wait for
// the coordinator.
func (g *groups) carryOver(from, to clientKey, credential, proof string, expires time.Time) {
	for _, m := range g.ofKey(from) {
		g.reach(m, to)
		g.s.wg.Add(1)
		go func() {
			defer g.s.wg.Done()
			m.carryOver(m.ctx, credential, proof, expires)
		}()
	}
}

// get finds a live member.
func (g *groups) get(group, id string) *member {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.byID[memberRef{group, id}]
}

// reach makes m reachable by key too (carryOver), unless m is gone or
// already is; past maxMemberKeys its oldest key goes.
func (g *groups) reach(m *member, key clientKey) {
	g.mu.Lock()
	defer g.mu.Unlock()
	keys, ok := g.keys[m]
	if !ok || slices.Contains(keys, key) {
		return
	}
	if len(keys) >= maxMemberKeys {
		g.unlistLocked(m, keys[0])
		keys = slices.Delete(keys, 0, 1)
	}
	g.keys[m] = append(keys, key)
	g.byKey[key] = append(g.byKey[key], m)
}

// own finds the live member id of group reachable by the client key: a
// Kafka member id is no credential (KIP-848 clients make their own, and
// a classic leader learns the others'), so a member is used — heartbeat,
// commit, offsets, leave, rejoin — only by the client that opened it
// (its credential's issuer and holder, client.id and address, or a
// credential it renewed that one with: carryOver); anyone else gets nil
// (UNKNOWN_MEMBER_ID), as if there were no such member.
func (g *groups) own(group, id string, key clientKey) *member {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m := g.byID[memberRef{group, id}]; m != nil && slices.Contains(g.keys[m], key) {
		return m
	}
	return nil
}

// taken reports whether id is a live member of group another client
// than key opened: a join naming it is refused rather than replacing it.
func (g *groups) taken(group, id string, key clientKey) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.byID[memberRef{group, id}]
	return m != nil && !slices.Contains(g.keys[m], key)
}

// ofKey lists the members a client key reaches.
func (g *groups) ofKey(key clientKey) []*member {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.byKey[key])
}

func (g *groups) remove(m *member) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ref := memberRef{m.group, m.id}
	if g.byID[ref] == m {
		delete(g.byID, ref)
	}
	keys, registered := g.keys[m]
	for _, key := range keys {
		g.unlistLocked(m, key)
	}
	delete(g.keys, m)
	if registered && m.place == placeHeld {
		g.leavePlaceLocked(m.key.tenant)
	}
	g.markPlaceLocked(m, placeHeld) // a lent or passed place is the joiner's now: giveBackLocked gives back nothing
	switch n := g.byHolder[m.holder]; {
	case !registered || n == 0:
	case n == 1:
		delete(g.byHolder, m.holder)
	default:
		g.byHolder[m.holder] = n - 1
	}
}

// renewalPending reports whether a fetch of a connection authenticated
// with credential cred (its id; expiring credExp), whose own key reaches
// no member, pauses rather than fails: a member of this gateway was
// opened under holder's name, client.id and address (byHolder), so the
// connection may be its client's, authenticated with a renewed
// credential before the client's group connection re-authenticated with
// it (KIP-368) and carried the member over. KafkaJS opens its fetch
// connections after the join, each with the credential its token
// provider reads then. Its fetches pause (answered empty, throttled)
// rather than fail with TOPIC_AUTHORIZATION_FAILED, which KafkaJS does
// not retry: its consumer crashed. Nothing is read: the fetch goes on
// once a connection of the member re-authenticated with the same
// credential (carryOver), or fails once the member is gone.
//
// Bounded: only while a member of holder lives here; for each client
// (holder) and credential in one window, from its first paused fetch to
// the credential's own expiry or pauseMax (kafka_reauth_max +
// request_timeout) after it, the earlier — by then the client's group
// connection has re-authenticated (the listener tells every client
// that can a session of at most kafka_reauth_max, reauthWithin) and
// carried the member over to its latest credential, and this connection
// too, into a credential that reaches the member or pauses in a window
// of its own; or its session has ended — never longer
// (not by a later member, nor a new connection); and at most
// renewalPausesMax credentials at once (an entry goes once its credential
// expired; full, a new one is refused as before the relaxation). A
// tighter end — the expiry of the credential the member held at the
// first pause — refused a real client: KafkaJS's group connection may
// re-authenticate straight to the renewal after the one a fetch
// connection holds (the token file changed twice meanwhile, a loaded
// machine), and that connection reaches the member only at its own
// re-authentication, near its credential's end (KafkaJS crashed,
// TestKafkaJSGroupRenewedManyTimes). A same-named credential of another
// holder at the same client.id and address is answered empty instead
// of TOPIC_AUTHORIZATION_FAILED for at most pauseMax (10 min 10 s at the
// defaults; was its own lifetime, days for an admin-minted credential),
// once, and reads nothing.
func (g *groups) renewalPending(holder holderKey, cred string, credExp, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byHolder[holder] == 0 {
		return false
	}
	key := pauseKey{holder, cred}
	p, ok := g.pauses[key]
	if !ok {
		if len(g.pauses) >= renewalPausesMax {
			maps.DeleteFunc(g.pauses, func(_ pauseKey, p renewalPause) bool { return !now.Before(p.until) })
			if len(g.pauses) >= renewalPausesMax {
				return false
			}
		}
		p = renewalPause{until: credExp}
		if g.pauseMax > 0 {
			if end := now.Add(g.pauseMax); end.Before(credExp) {
				p.until = end
			}
		}
		g.pauses[key] = p
	}
	return now.Before(p.until)
}

// unlistLocked takes m out of key's members. g.mu held.
func (g *groups) unlistLocked(m *member, key clientKey) {
	list := slices.DeleteFunc(g.byKey[key], func(x *member) bool { return x == m })
	if len(list) == 0 {
		delete(g.byKey, key)
	} else {
		g.byKey[key] = list
	}
}

// capability returns the capability a member of this gateway reachable
// by key holds for topic/partition ("" when none), whether key reaches
// any member here, and whether the client's fetches of it pause rather
// than fail (member.capability): when none holds it, one is renewing it
// for its client (member.renewing: it comes back to that member) or
// telling it again; when one does, a refusal of it as revoked is its
// carry-over's fence, the regrant on its way (member.refencePending).
func (g *groups) capability(key clientKey, topic string, partition int32) (token string, member, paused bool) {
	ms := g.ofKey(key)
	p := session.Partition{Topic: topic, Partition: partition}
	for _, m := range ms {
		t, r := m.capability(p)
		if t != "" {
			return t, true, r
		}
		paused = paused || r
	}
	return "", len(ms) > 0, paused
}

func (g *groups) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.byID)
}

// closeAll closes every member (each releases its partitions and leaves)
// and waits for them to be gone up to request_timeout or the gateway's
// shutdown_timeout, whichever is shorter: a coordinator that fails every
// call (500, unreachable) keeps members from leaving, and Close must end
// within the grace period the gateway's operator gave it (before, it
// waited request_timeout whatever shutdown_timeout said:
// TestGatewayShutdownWithinGraceWhileJoinsFail). Members still leaving
// are then dropped; the coordinator expires them.
func (g *groups) closeAll() {
	g.mu.Lock()
	all := make([]*member, 0, len(g.byID))
	for _, m := range g.byID {
		all = append(all, m)
	}
	g.mu.Unlock()
	wait := g.s.cfg.RequestTimeout
	if t := g.s.cfg.ShutdownTimeout; t > 0 {
		wait = min(wait, t)
	}
	deadline := time.After(wait)
	for _, m := range all {
		m.close()
	}
	for _, m := range all {
		select {
		case <-m.ctx.Done():
		case <-deadline:
			m.mu.Lock()
			m.finishLocked()
			m.mu.Unlock()
		}
	}
	g.api.CloseIdleConnections()
}

// close closes the member on the client's behalf (leave or shutdown).
func (m *member) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closeLocked(time.Now())
}

// Members is the number of group members this gateway runs sessions for.
func (s *Server) Members() int { return s.groups.count() }

// MembersEvicted is how many members were closed for another tenant's
// join at kafka_max_members (groups.fairShareLocked).
func (s *Server) MembersEvicted() uint64 { return s.membersEvicted.Load() }

// MemberEvictionsPaced is how many joins were refused (retriable) for an
// eviction their tenant made within kafka_member_eviction_interval
// (groups.paceLocked).
func (s *Server) MemberEvictionsPaced() uint64 { return s.membersEvictionsPaced.Load() }

// groupAPIs are the group coordinator's APIs.
func groupAPIs() []apiRow {
	return []apiRow{
		{key: 8, min: 2, max: 9, handle: handleOffsetCommit},
		{key: 9, min: 1, max: 9, handle: handleOffsetFetch},
		{key: 10, min: 0, max: 4, handle: handleFindCoordinator},
		{key: 11, min: 0, max: 9, handle: handleJoinGroup},
		{key: 12, min: 0, max: 4, handle: handleHeartbeat},
		{key: 13, min: 0, max: 5, handle: handleLeaveGroup},
		{key: 14, min: 0, max: 5, handle: handleSyncGroup},
		{key: 68, min: 0, max: 1, handle: handleConsumerGroupHeartbeat},
	}
}
