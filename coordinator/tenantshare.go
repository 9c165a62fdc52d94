package coordinator

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/ocap"
)

// loopShare is each tenant's fair share of the coordinator's loop for its
// members' requests: heartbeats, commits, leaves and offset reads. The
// loop is one goroutine serving every tenant in the order requests
// arrive, so one tenant spinning heartbeats (wait_ms 0) from 200
// connections kept ~200 of its requests in the loop's queue at all
// times, and another tenant's heartbeat waited behind all of them: 0.55
// ms on average quiet, 21 ms (46 worst) beside it (redteam12's lead 4,
// redteam13 #1). Now a tenant has at most tenant_loop_share requests in
// the queue at once; its next ones wait in the shell for one of those to
// be taken by the loop (each tenant's own waiters in arrival order), at
// most tenant_loop_waiters of them, and one more — or one that waited
// loopShareWait — is 429 rate_limited with Retry-After. A request leaves
// the queue when the loop takes it (its event built, its query run), not
// when it is answered: a heartbeat held for news holds no place. The
// share is work-conserving: a tenant alone uses the whole loop, and a
// place comes back as soon as the loop takes the request, so the bound
// is on what another tenant's request waits behind — at most
// tenant_loop_share of each other tenant's — never on a tenant's rate.
//
// The tenant is the member's (group.MemberTenants: an OAuth client, an
// IdP identity, else the credential), looked up by the member token's
// group and sub outside the loop; a token whose member is not live (it
// left, expired, was revoked: the loop would answer unknown_member)
// shares the one tenant unknownTenant, so stale member tokens of many
// members are one tenant's share too. An outside lease holder's commit
// counts for its capability's tnt, else for its holder (outsideTenant):
// counted in unknownTenant, any client could leave a group and spin
// heartbeats with its kept member token to have an administrator's lease
// holder's commits refused 429 (TestStaleMemberTokensDoNotStarveLeaseHolders).
type loopShare struct {
	queued    int // tenant_loop_share
	waiters   int // tenant_loop_waiters
	perSecond float64
	rate      *keyedLimiter // tenant_member_rate, tenant_member_burst
	commits   tenantRate    // tenant_commit_rate, tenant_commit_burst
	wait      atomic.Int64  // loopShareWait in nanoseconds (tests lengthen it)
	index     *group.MemberTenants

	mu      sync.Mutex
	tenants map[string]*tenantPlaces // only tenants with a request queued or waiting

	waited   prometheus.Counter
	refused  *prometheus.CounterVec
	deferred prometheus.Counter
}

// unknownTenant is the share of member tokens whose member is not live.
const unknownTenant = "\x00unknown"

// outsideTenant is whose share an outside lease holder's commit counts
// in: its capability's tnt, else its holder in its group — an
// administrator named it, so holders cannot be multiplied by a client.
func outsideTenant(groupName string, claims *ocap.Claims) string {
	if claims.Tenant != "" {
		return claims.Tenant
	}
	return "\x00outside:" + groupName + "/" + claims.Subject
}

// loopShareWait is the longest a request waits for its tenant's place.
const loopShareWait = 5 * time.Second

// tenantPlaces is one tenant's places in the loop's queue: a send on
// places takes one, a receive gives it back.
type tenantPlaces struct {
	places   chan struct{}
	matching chan struct{} // its one topic pattern matched at a time (patterns.go)
	users    int           // requests holding or waiting for a place
	waiting  int
}

func newLoopShare(cfg Config, index *group.MemberTenants) *loopShare {
	s := &loopShare{
		queued: cfg.TenantLoopShare, waiters: cfg.TenantLoopWaiters, index: index, tenants: map[string]*tenantPlaces{},
		perSecond: cfg.TenantMemberRate, rate: newKeyedLimiter(cfg.TenantMemberRate, cfg.TenantMemberBurst, cfg.RateLimitEntries),
		commits: tenantRate{
			limiter: newKeyedLimiter(cfg.TenantCommitRate, cfg.TenantCommitBurst, cfg.RateLimitEntries), perSecond: cfg.TenantCommitRate,
			setting: "coordinator.tenant_commit_rate", spends: "commits and releases", names: "coordinator.tenant_commit_rate, tenant_commit_burst",
		},
		waited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capgate_coordinator_tenant_loop_waits_total",
			Help: "Member requests (heartbeats, commits, leaves, offset reads) that waited for a place of their tenant's tenant_loop_share in the coordinator's loop queue.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capgate_coordinator_tenant_loop_refused_total",
			Help: "Member requests answered 429: their tenant's tenant_member_rate spent beyond a 5 s wait (limit tenant_member_rate; a commit's: tenant_commit_rate), tenant_loop_waiters waiting already (limit tenant_loop_waiters), or no place of its tenant_loop_share within 5 s (limit wait).",
		}, []string{"limit"}),
		deferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capgate_coordinator_mints_deferred_total",
			Help: "Grants and renewals a join's or heartbeat's answer left for the member's next heartbeats: their tenant's tenant_member_rate was spent (a token per capability minted, at most tenant_member_burst ahead).",
		}),
	}
	s.wait.Store(int64(loopShareWait))
	return s
}

func (s *loopShare) register(r *prometheus.Registry) {
	r.MustRegister(s.waited, s.refused, s.deferred)
}

// memberTenant is the tenant whose share a request of member id of
// groupName counts in.
func (s *loopShare) memberTenant(groupName, id string) string {
	if t, ok := s.index.Tenant(groupName, id); ok {
		return t
	}
	return unknownTenant
}

// take admits a request of tenant: a token of the tenant's rate
// (tenant_member_rate, waiting for it when it comes within
// loopShareWait), then a place of its share, waiting for one if need be.
// Past tenant_loop_waiters waiting, or a token or place not come within
// loopShareWait, it answers 429 rate_limited with Retry-After (503 when
// the loop stopped meanwhile) and returns false. release gives the place
// back; it may be called more than once (the loop calls it when it takes
// the request, the handler after the answer: the first counts).
func (s *loopShare) take(ctx *fasthttp.RequestCtx, tenant string, rate tenantRate, done <-chan struct{}) (release func(), ok bool) {
	t := s.enter(tenant)
	if !s.admitRate(ctx, tenant, t, rate, done) {
		s.leave(tenant, t)
		return nil, false
	}
	switch s.waitTurn(ctx, t, t.places, done) {
	case nil:
		return s.releaser(tenant, t, t.places), true
	case errLoopShareWait:
		s.leave(tenant, t)
		s.refused.WithLabelValues("wait").Inc()
		writeLoopShareRefusal(ctx, fmt.Sprintf("this member's tenant's requests waited %s for the coordinator's loop (%d at once: coordinator.tenant_loop_share); retry later",
			time.Duration(s.wait.Load()), s.queued), "coordinator.tenant_loop_share", s.queued, time.Second)
	case errUnavailable:
		s.leave(tenant, t)
		writeMachineError(ctx, nil, errUnavailable)
	default: // answered: tenant_loop_waiters
		s.leave(tenant, t)
	}
	return nil, false
}

// waitTurn takes one of slot (a send), at once or waiting for it among
// t's waiters at most loopShareWait: nil once taken; errLoopShareWait,
// errUnavailable (the loop stopped), or errWaitersFull when
// tenant_loop_waiters were waiting already (answered 429).
func (s *loopShare) waitTurn(ctx *fasthttp.RequestCtx, t *tenantPlaces, slot chan struct{}, done <-chan struct{}) error {
	select {
	case slot <- struct{}{}:
		return nil
	default:
	}
	if !s.startWaiting(ctx, t) {
		return errWaitersFull
	}
	defer s.stopWaiting(t)
	timer := time.NewTimer(time.Duration(s.wait.Load()))
	defer timer.Stop()
	select {
	case slot <- struct{}{}:
		return nil
	case <-timer.C:
		return errLoopShareWait
	case <-done:
		return errUnavailable
	}
}

// tenantRate is one of a tenant's rates — what its requests spend — and
// how a refusal names it.
type tenantRate struct {
	limiter   *keyedLimiter
	perSecond float64
	setting   string // the limit a refusal names
	spends    string // what spends it, in a refusal's message
	names     string // its settings, in a refusal's message
}

// members is the rate a tenant's member requests but commits spend:
// tenant_member_rate, with the capabilities its answers mint.
func (s *loopShare) members() tenantRate {
	return tenantRate{limiter: s.rate, perSecond: s.perSecond, setting: "coordinator.tenant_member_rate",
		spends: "heartbeats, leaves, offset reads, rejoins and renewals, or group reads costing as much", names: "coordinator.tenant_member_rate, tenant_member_burst"}
}

// admitRate takes a token of tenant's rate, waiting for it (counted
// among t's waiters) when it comes within loopShareWait, or answers the
// refusal and returns false.
func (s *loopShare) admitRate(ctx *fasthttp.RequestCtx, tenant string, t *tenantPlaces, rate tenantRate, done <-chan struct{}) bool {
	delay, cancel, ok := rate.limiter.reserve(tenant, time.Now(), time.Duration(s.wait.Load()))
	if !ok {
		s.refused.WithLabelValues(strings.TrimPrefix(rate.setting, "coordinator.")).Inc()
		writeLoopShareRefusal(ctx, fmt.Sprintf("this tenant sends more than %g %s a second (%s); retry later",
			rate.perSecond, rate.spends, rate.names), rate.setting, int(rate.perSecond), delay)
		return false
	}
	if delay <= 0 {
		return true
	}
	waited, ok := s.sleepAmong(ctx, t, delay, done)
	if !waited {
		cancel()
	}
	return ok
}

// sleepAmong waits d counted among t's waiters. waited is false when
// tenant_loop_waiters were waiting already (answered 429); ok is false
// when it answered a refusal (that, or the loop stopping meanwhile: 503).
func (s *loopShare) sleepAmong(ctx *fasthttp.RequestCtx, t *tenantPlaces, d time.Duration, done <-chan struct{}) (waited, ok bool) {
	if !s.startWaiting(ctx, t) {
		return false, false
	}
	defer s.stopWaiting(t)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true, true
	case <-done:
		writeMachineError(ctx, nil, errUnavailable)
		return true, false
	}
}

// startWaiting counts one more of t's requests waiting, or answers 429
// and returns false when tenant_loop_waiters are waiting already.
func (s *loopShare) startWaiting(ctx *fasthttp.RequestCtx, t *tenantPlaces) bool {
	s.mu.Lock()
	if t.waiting >= s.waiters {
		s.mu.Unlock()
		s.refused.WithLabelValues("tenant_loop_waiters").Inc()
		writeLoopShareRefusal(ctx, fmt.Sprintf("this member's tenant has %d requests waiting for the coordinator's loop already (coordinator.tenant_loop_waiters); retry later",
			s.waiters), "coordinator.tenant_loop_waiters", s.waiters, time.Second)
		return false
	}
	t.waiting++
	s.mu.Unlock()
	s.waited.Inc()
	return true
}

func (s *loopShare) stopWaiting(t *tenantPlaces) {
	s.mu.Lock()
	t.waiting--
	s.mu.Unlock()
}

var (
	errLoopShareWait = errors.New("coordinator: waited too long for the tenant's loop share")
	errWaitersFull   = errors.New("coordinator: the tenant's loop waiters are full")
)

// releaser gives t's place in slot back once, however often it is
// called.
func (s *loopShare) releaser(tenant string, t *tenantPlaces, slot chan struct{}) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			<-slot
			s.leave(tenant, t)
		})
	}
}

// enter counts one more user of tenant's places (leave drops it),
// making them when it has none.
func (s *loopShare) enter(tenant string) *tenantPlaces {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenants[tenant]
	if t == nil {
		t = &tenantPlaces{places: make(chan struct{}, s.queued), matching: make(chan struct{}, 1)}
		s.tenants[tenant] = t
	}
	t.users++
	return t
}

// leave drops one user of t, and t when it has none left.
func (s *loopShare) leave(tenant string, t *tenantPlaces) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.users--; t.users == 0 && s.tenants[tenant] == t {
		delete(s.tenants, tenant)
	}
}

// charge spends n more tokens of tenant's rate at once, never waiting: a
// read's cost beyond its first token, known once the loop ran it. The
// bucket goes into debt (at most the burst), which the tenant's next
// requests wait for — or are refused for when it is more than
// loopShareWait off.
func (s *loopShare) charge(tenant string, n int) {
	s.rate.charge(tenant, time.Now(), n)
}

// awaitDebt holds a join until its tenant's tenant_member_rate is out of
// debt — among the tenant's waiters, when that comes within
// loopShareWait — or answers 429 naming tenant_member_rate and returns
// false. A join takes no token (a first join spends nothing of the
// rate, review20); what its answer mints is paid when minted (mintAllowance).
// Without the wait a tenant's joins minted at join_rate alone: the first
// member of an empty group is granted every partition of its topics in
// the answer, a capability (an Ed25519 signature) each, and join–leave
// cycles, or first joins into its groups_per_credential groups with
// members expiring after session_timeout_min, had a group of 10,000
// partitions signed 50 times a second (review21).
func (s *loopShare) awaitDebt(ctx *fasthttp.RequestCtx, tenant string, done <-chan struct{}) bool {
	owed := s.rate.owed(tenant, time.Now())
	if owed <= 0 {
		return true
	}
	if owed > time.Duration(s.wait.Load()) {
		s.refused.WithLabelValues("tenant_member_rate").Inc()
		writeLoopShareRefusal(ctx, fmt.Sprintf("this tenant's joins, heartbeats, commits and reads spend more than %g a second — a join spends one per capability its answer mints (coordinator.tenant_member_rate, tenant_member_burst); retry later",
			s.perSecond), "coordinator.tenant_member_rate", int(s.perSecond), owed)
		return false
	}
	t := s.enter(tenant)
	defer s.leave(tenant, t)
	_, ok := s.sleepAmong(ctx, t, owed, done)
	return ok
}

// mintAllowance takes a token of tenant's rate for each of up to n
// capabilities an answer is about to mint — as many as the bucket holds
// and tenant_member_burst more, into debt — and says how many it may
// mint now (paceMints puts the rest back for the member's next
// heartbeats). Every signature a join's or heartbeat's answer makes is
// paid for, and never more than the burst ahead, however many requests
// mint at once: a join's answer paid after the fact and at most the
// burst (charge), so a join granted more than tenant_member_burst
// partitions, or joins admitted together while the tenant owed nothing
// (each into its own empty group), minted past the rate; and a
// heartbeat minted every grant and renewal it carried for its one token
// — a resync renews every partition the member owns, once a second
// (redteam16).
func (s *loopShare) mintAllowance(tenant string, n int) int {
	return s.rate.takeUpTo(tenant, time.Now(), n, s.rate.burst)
}

// paceMints is what of news's grants and renewals tenant's rate pays
// for now (mintAllowance), the most urgent first (group.PaceNews:
// earliest deadline first — a partition the member cannot read at all,
// then the capability that ends soonest); the rest goes back into the
// member's news (group.RedeliverNews) for its next heartbeats, which pay
// for it in turn. Revokes always go. In partition order, as before, a
// rate paying for fewer capabilities than were due starved the last
// partitions: the first ones came due again before the round reached
// them (TestTakeoverPacedMintsStarveNoPartition). When the rest cannot be
// put back (the loop stopped, the member went) it is not minted either:
// the member's resync or the next renewal brings it, as after a lost
// answer. News.Paid of them were paid for already (a token reserved
// while the heartbeat was held).
//
// When the rate pays for not all and the answer carries no revoke, a
// heartbeat's (held until `until` at the latest; a join's passes zero)
// is not answered at once with what it pays: the tokens that come
// within its hold for the partitions left that the member cannot read
// (group.Unreadable: a grant, a renewal of no capability it holds) are
// reserved too (reserveMints, in line with the tenant's other requests;
// when it pays for none, at least the next one, within loopShareWait
// whenever it comes) and held is the machine event that
// holds the same heartbeat again until the last is the tenant's
// (group.DeferNews); the answer it gets then pays for those and the
// ones paid now. Answered empty, the member came straight back with
// another heartbeat, a token of the same rate: after a takeover at 2
// tokens/s 18 of 24 heartbeats carried nothing and six partitions took
// 21-37 s to be held; answered with one, each capability cost a
// heartbeat's token too (TestPacedJoinHoldsEveryPartition,
// TestTakeoverPacedMintsStarveNoPartition). The price: the first
// capability comes up to the hold later. A revoke never waits: an
// answer carrying one goes at once, with what the rate pays.
func (c *Coordinator) paceMints(tenant string, news group.News, until time.Time) (group.News, *group.DeferNews) {
	n := len(news.Grants) + len(news.Renew)
	paid := min(news.Paid, n)
	k := paid + c.share.mintAllowance(tenant, n-paid)
	if k == n {
		return news, nil
	}
	c.share.deferred.Add(float64(n - k))
	now, later := group.PaceNews(news, k)
	if want := group.Unreadable(later, until); len(news.Revoke) == 0 && (k == 0 || want > 0) {
		if k == 0 {
			want = max(want, 1) // answered empty, the member comes straight back
		}
		if more, at := c.share.reserveMints(tenant, want, until, k > 0); more > 0 {
			return group.News{Ref: news.Ref, Group: news.Group, MemberID: news.MemberID},
				&group.DeferNews{News: news, NotBefore: at, Until: until, Paid: k + more}
		}
	}
	if err := c.redeliverNews(later); err != nil {
		c.log.Warn("pace mints: could not put back what the tenant's rate left for later",
			zap.String("group", news.Group), zap.String("member_id", news.MemberID), zap.Error(err))
	}
	return now, nil
}

// reserveMints reserves tokens of tenant's rate for up to n more
// capabilities of an answer held until `until` at most (zero: not held,
// a join's): the next one when it comes within loopShareWait — by
// `until` when the answer carries some already (some) — and each after
// it that comes by `until`: the tokens that come while the heartbeat is
// held (keyedLimiter.reserveUpTo). It says how many it reserved (0:
// none) and when the last is the tenant's.
func (s *loopShare) reserveMints(tenant string, n int, until time.Time, some bool) (paid int, at time.Time) {
	now := time.Now()
	if !until.After(now) {
		return 0, time.Time{}
	}
	wait := time.Duration(s.wait.Load())
	if some {
		wait = min(wait, until.Sub(now))
	}
	return s.rate.reserveUpTo(tenant, now, n, wait, until)
}

// admitRejoin prices a rejoin of member (with its member token, or with
// a client credential naming it; not a renewal) in the requester's
// tenant's tenant_member_rate: a token, and one per partition the member
// owns when it is the tenant's own — the rejoin fences every one of them
// (a sync-log entry each, sent to every gateway, a persisted record, a
// regrant). Rejoins had only join_rate (5/s per member with its token,
// per tenant with a credential), so a tenant fenced ~5 × every partition
// it holds a second, outside any tenant bound: 500 sync-log entries a
// request for a member of 500 partitions, past sync_log_max (10,000)
// within a second for a tenant of a few thousand, every lagging gateway
// then reset (redteam14 #9). Another tenant's member costs one token
// (the machine refuses the rejoin; its partitions are not the
// requester's to pay for, nor to learn the count of). Past the rate it is
// 429 (Retry-After), as a heartbeat is: its first token waited for up to
// loopShareWait, the rest at once (admitPerOwned).
func (c *Coordinator) admitRejoin(ctx *fasthttp.RequestCtx, groupName, member, tenant string) bool {
	return c.admitPerOwned(ctx, groupName, member, tenant, "a rejoin fences each partition its member owns")
}

// admitRenewal prices a renewal (renew_token) as admitRejoin prices a
// rejoin: it fences nothing, but its answer mints a capability again for
// every partition the member owns (group's replyJoin), an Ed25519
// signature each. tenant is the member's (renewalTenant), whatever
// credential the renewal presents. With join_rate alone, a tenant renewing its member of
// 10,000 partitions a thousand times at once (join_burst) asked for ten
// million signatures — minutes of both cores — and 500,000 a second
// after (lead, with join_burst raised to a fleet's size).
func (c *Coordinator) admitRenewal(ctx *fasthttp.RequestCtx, groupName, member, tenant string) bool {
	return c.admitPerOwned(ctx, groupName, member, tenant, "a renewal mints a capability again for each partition its member owns")
}

// admitPerOwned is admitRejoin's and admitRenewal's price. The count of
// what the member owns is the loop's, asked as a member read is
// (queryShared: the first token waited for, a place of the tenant's loop
// share), and a refusal after it owes the walk as a read does
// (readItemsPerToken). The query was asked of the loop before anything
// was paid and outside the share, so a tenant whose rate was spent still
// put a loop query — a flush and a walk of everything its member held —
// ahead of every other tenant's requests for each rejoin, then answered
// 429: M members × join_burst at once (join_rate keys a member token's
// rejoins by member), M × join_rate a second (redteam17 #1).
func (c *Coordinator) admitPerOwned(ctx *fasthttp.RequestCtx, groupName, member, tenant, why string) bool {
	owned, paid := 0, 0
	if c.share.memberTenant(groupName, member) == tenant {
		shared, err := c.queryShared(ctx, tenant, func(m *group.Machine) { owned = m.Owned(groupName, member) })
		if !shared {
			return false
		}
		if err != nil {
			writeMachineError(ctx, nil, err)
			return false
		}
		paid = 1
	}
	if ok, wait := c.share.rate.allowN(tenant, c.now(), 1+owned-paid); !ok {
		c.share.charge(tenant, owned/readItemsPerToken)
		c.share.refused.WithLabelValues("tenant_member_rate").Inc()
		writeLoopShareRefusal(ctx, fmt.Sprintf("%s (%d): this tenant's rejoins, renewals, heartbeats, commits and reads spend more than %g a second (coordinator.tenant_member_rate, tenant_member_burst); retry later",
			why, owned, c.share.perSecond), "coordinator.tenant_member_rate", int(c.share.perSecond), wait)
		return false
	}
	return true
}

// writeLoopShareRefusal answers 429 rate_limited naming limit, with
// Retry-After wait.
func writeLoopShareRefusal(ctx *fasthttp.RequestCtx, message, limit string, max int, wait time.Duration) {
	writeErrorDetails(ctx, api.CodeRateLimited, message,
		map[string]any{"retry_after_ms": wait.Milliseconds(), "limit": limit, "max": max})
	setRetryAfter(ctx, wait)
}

// callShared is call for a request counted in tenant's loop share: it
// waits for a place (or answers the refusal and returns ok false), and
// the place is given back when the loop builds the event.
func (c *Coordinator) callShared(ctx *fasthttp.RequestCtx, tenant string, build func(group.Ref) group.Event) (msg group.Message, ok bool, err error) {
	return c.callSharedAt(ctx, tenant, c.share.members(), build)
}

// callSharedAt is callShared spending rate (a commit's:
// tenant_commit_rate).
func (c *Coordinator) callSharedAt(ctx *fasthttp.RequestCtx, tenant string, rate tenantRate, build func(group.Ref) group.Event) (msg group.Message, ok bool, err error) {
	release, ok := c.share.take(ctx, tenant, rate, c.loop.done)
	if !ok {
		return nil, false, nil
	}
	defer release()
	msg, err = c.call(func(ref group.Ref) group.Event {
		release()
		return build(ref)
	})
	return msg, true, err
}

// queryShared is query for a request counted in tenant's loop share, as
// callShared.
func (c *Coordinator) queryShared(ctx *fasthttp.RequestCtx, tenant string, fn func(*group.Machine)) (ok bool, err error) {
	release, ok := c.share.take(ctx, tenant, c.share.members(), c.loop.done)
	if !ok {
		return false, nil
	}
	defer release()
	return true, c.query(func(m *group.Machine) {
		release()
		fn(m)
	})
}
