package sim

import (
	"strconv"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/session"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/gateway/guard"
	"github.com/capgate/capgate/ocap"
)

// Sync client bounds, as gateway/sync.go.
const (
	syncBackoffMin  = 50 * time.Millisecond
	syncBackoffMax  = time.Second
	fetchRecordsMax = 50 // records one fetch answers at most (max_bytes)
)

func gatewayID(i int) string {
	if i == rogueGateway {
		return "rogue"
	}
	return "gw-" + strconv.Itoa(i)
}

// rogueGateway is the gateway index of the rogue's polls (roguePoll): not
// a gateway of the world.
const rogueGateway = -1

// gateway is one gateway process: the real authz.View and the real shell
// decisions of gateway/guard — the sync client's (Follower: what to poll,
// Apply, Acked, backoff, the self-fence) and the in-flight registry's
// (Registry: which fetches an update or a newer capability cancels) —
// carried out over the simulated network and Kafka instead of HTTP,
// goroutines and contexts. The fetch path runs the gateway's checks in
// the order gateway/call.go and records_fetch.go run them (sync state,
// verify, raise the fence on a newer capability, Decide; broker long
// poll; Decide and sync state again). Its clock is offset from true time
// by a constant within max_clock_skew. A restart loses the view; it
// refuses fetches until its first sync.
type gateway struct {
	w        *World
	idx      int
	node     int
	id       string
	skew     time.Duration
	up       bool
	inc      int
	view     *authz.View
	follower *guard.Follower
	inflight *guard.Registry[*fetchEntry]

	polling  bool
	pollID   uint64
	bootedAt time.Duration // true time of a boot under a new id not yet synced (fill.go; -1: none)
	oldIDs   []string      // ids of its earlier incarnations (fill.go)
	pollSent time.Duration // local clock
	// stuckUntil: until then (true time) every sync answer fails to
	// apply (a bug, a full disk): the follower counts a failed poll and
	// polls again with the same after — polling, acknowledging nothing,
	// and self-fencing sync_timeout after its last applied answer.
	stuckUntil time.Duration

	verified map[string]bool // the verified-token cache
}

// fetchRequest is a consumer's GET .../records.
type fetchRequest struct {
	from    int
	call    call
	token   string
	part    session.Partition
	offset  int64
	maxWait time.Duration
	reply   func(fetchResult)
}

// fetchResult is the gateway's answer; transport means no answer at all.
type fetchResult struct {
	transport        bool
	code             api.Code
	values           []int64
	next             int64
	earliest, latest int64
}

// fetchEntry is a fetch between admission and its answer (or cancel): the
// value the registry keeps for it, with what the checkers need.
type fetchEntry struct {
	gw       *gateway
	inc      int
	entry    *guard.Entry[*fetchEntry]
	claims   *ocap.Claims
	req      authz.Request
	part     int
	member   string
	admitted time.Duration
	done     bool
	respond  func(fetchResult)
}

func newGateway(w *World, i int) *gateway {
	return &gateway{w: w, idx: i, node: w.gatewayNode(i), id: gatewayID(i), skew: w.prof.gateway.skew[i], bootedAt: -1}
}

// bugs are the gateway's planted bugs.
func (g *gateway) bugs() guard.Bugs {
	b := g.w.opts.bugs
	return guard.Bugs{AckBeforeApply: b.ackBeforeApply, NoSelfFence: b.noSelfFence, KeepVictims: b.keepVictims}
}

// local is the gateway's clock as a virtual time.
func (g *gateway) local() time.Duration { return g.w.now + g.skew }

func (g *gateway) localWall() time.Time { return base.Add(g.local()) }

// boot starts an incarnation with an empty view, not ready until synced.
func (g *gateway) boot() {
	g.up = true
	g.inc++
	if g.w.prof.gatewayNewIDs && g.inc > 1 {
		g.oldIDs = append(g.oldIDs, g.id)
		g.id = gatewayID(g.idx) + "." + strconv.Itoa(g.inc) // fill.go
		g.w.newIDBooted(g)
	}
	g.view = authz.NewView(authz.Config{}) // the leeway comes with the coordinator's settings
	g.follower = guard.NewFollower(guard.SyncConfig{Timeout: g.w.prof.gateway.syncTimeout,
		BackoffMin: syncBackoffMin, BackoffMax: syncBackoffMax, Bugs: g.bugs()}, g.view)
	g.inflight = guard.NewRegistry[*fetchEntry](g.bugs())
	g.polling = false
	g.verified = map[string]bool{}
	g.poll()
}

// fetches are the fetches in flight, in admission order.
func (g *gateway) fetches() []*fetchEntry {
	if g.inflight == nil {
		return nil
	}
	entries := g.inflight.Entries()
	out := make([]*fetchEntry, len(entries))
	for i, e := range entries {
		out[i] = e.Value
	}
	return out
}

// poll sends GET /v1/sync; after acknowledges everything up to it.
func (g *gateway) poll() {
	g.pollID++
	id, inc, after := g.pollID, g.inc, g.follower.After()
	g.polling, g.pollSent = true, g.local()
	if g.w.tracing() {
		g.w.tracef("%s poll after=%d", g.id, after)
	}
	g.w.check.acked(g, after)
	timeout := func() {
		if g.up && g.inc == inc && g.polling && g.pollID == id {
			g.syncFailed() // the poll's context timed out
		}
	}
	req := &request{kind: reqSync, from: g.node, gateway: g.idx, name: g.id, inc: inc, sent: g.w.now, after: after, wait: g.w.prof.gateway.syncWait,
		call: call{deadline: g.w.now + g.w.prof.gateway.syncTimeout, timeout: timeout}, reply: func(r response) { g.onSync(inc, id, r) }}
	g.w.sendCoordinator(g.node, true, req)
}

// onSync carries out the follower's order: Apply, cancel (and finish)
// every fetch the update refuses, then Acked, then the next poll.
func (g *gateway) onSync(inc int, id uint64, r response) {
	if !g.up || g.inc != inc || !g.polling || g.pollID != id {
		return // an answer nobody waits for any more
	}
	g.polling = false
	if g.w.tracing() {
		g.w.tracef("%s sync answered transport=%t code=%q seq=%d reset=%t", g.id, r.transport, r.code, r.sync.Seq, r.sync.Reset)
	}
	if r.transport || r.code != "" {
		if r.code == api.CodeLimitExceeded {
			g.w.stats.GatewayRefused++
		}
		g.syncFailed()
		return
	}
	if g.w.now < g.stuckUntil {
		g.syncFailed() // as an Apply that failed: nothing applied, nothing acknowledged
		return
	}
	now := g.localWall()
	changes, err := g.follower.Apply(r.sync, now)
	if err != nil {
		g.syncFailed()
		return
	}
	for _, e := range g.inflight.Refused(changes, g.view, now) {
		g.cancel(e.Value)
	}
	g.follower.Acked(base.Add(g.pollSent), r.sync.Seq)
	g.w.newIDSynced(g)
	g.w.check.resynced(g)
	g.poll()
}

// syncFailed backs off (Follower.Failed) and polls again.
func (g *gateway) syncFailed() {
	g.polling = false
	d := g.follower.Failed(g.w.rng.Int64N)
	inc := g.inc
	g.w.after(d, evGatewayPoll, g.node, func() {
		if g.up && g.inc == inc && !g.polling {
			g.poll()
		}
	})
}

// syncRefusal is the 503 code while the view cannot be vouched for
// (Follower.Refusal).
func (g *gateway) syncRefusal() api.Code { return g.follower.Refusal(g.localWall()) }

// receiveFetch admits or refuses one fetch, in the order of the real
// handler: offset syntax, sync, verify (+raise), Decide.
func (g *gateway) receiveFetch(req *fetchRequest) {
	if !g.up {
		g.answer(req, fetchResult{transport: true})
		return
	}
	claims, code := g.admit(req)
	if code != "" {
		g.answer(req, fetchResult{code: code})
		return
	}
	part := g.w.kafka.index[req.part]
	r := authz.Request{Topic: req.part.Topic, Partition: req.part.Partition, Op: ocap.OpFetch, Offset: g.w.kafka.resolve(req.part.Topic, req.part.Partition, req.offset)}
	e := &fetchEntry{gw: g, inc: g.inc, claims: claims, part: part, req: r, member: claims.Subject, admitted: g.w.now}
	e.respond = func(r fetchResult) { g.answer(req, r) }
	e.entry = g.inflight.Add(claims, r, e)
	g.w.stats.Admitted++
	g.w.check.admitted(e)
	wait := min(req.maxWait, g.w.prof.gateway.maxWait)
	g.w.kafka.fetch(e.part, req.offset, wait, g.node, func() { g.brokerAnswered(e) })
}

// admit runs the checks before the broker is asked.
func (g *gateway) admit(req *fetchRequest) (*ocap.Claims, api.Code) {
	if req.offset < offsetEarliest {
		return nil, api.CodeBadRequest // only -2 and -1 have words (earliest, latest)
	}
	if code := g.syncRefusal(); code != "" {
		return nil, code
	}
	claims := g.w.tokens.verify(req.token)
	now := g.localWall()
	switch {
	case claims == nil:
		return nil, api.CodeUnauthorized
	case now.Unix() >= int64(claims.ExpiresAt)+int64(g.follower.Settings().Leeway/time.Second): // the learned leeway
		return nil, api.CodeTokenExpired
	}
	if !g.verified[req.token] {
		g.verified[req.token] = true
		if claims.Epoch != 0 && g.view.Raise(claims.Group, claims.Topic, claims.PartitionNumber(), claims.Epoch) {
			key := authz.FenceKey{Group: claims.Group, Topic: claims.Topic, Partition: claims.PartitionNumber()}
			for _, e := range g.inflight.Below(key, claims.Epoch) {
				g.cancel(e.Value)
			}
		}
	}
	r := authz.Decide(claims, authz.Request{Topic: req.part.Topic, Partition: req.part.Partition, Op: ocap.OpFetch, Offset: req.offset}, g.view, now)
	if r != authz.Allow {
		if g.w.tracing() {
			g.w.tracef("%s refuses %s epoch %d jti %s: %s (fence %d)", g.id, req.part, claims.Epoch, claims.ID, r, g.view.Fence(claims.Group, claims.Topic, claims.PartitionNumber()))
		}
		return nil, r.Code()
	}
	return claims, ""
}

// offsetEarliest is the lowest offset a fetch may name: Kafka's earliest
// sentinel (-2), which the gateway resolves after the capability check
// (gateway/query.go: offset=earliest).
const offsetEarliest int64 = -2

// recheck decides a fetch again against the view and sync state of now:
// after the broker answered, or when a revocation cancelled it.
func (g *gateway) recheck(e *fetchEntry) api.Code {
	if r := authz.Decide(e.claims, e.req, g.view, g.localWall()); r != authz.Allow {
		return r.Code()
	}
	return g.syncRefusal()
}

// brokerAnswered decides again, with the view and sync state of now, and
// answers.
func (g *gateway) brokerAnswered(e *fetchEntry) {
	if e.done || !g.up || g.inc != e.inc {
		return
	}
	if code := g.recheck(e); code != "" {
		g.finish(e, fetchResult{code: code})
		return
	}
	values, next, ok := g.w.kafka.read(e.part, e.req.Offset, fetchRecordsMax)
	if !ok {
		g.finish(e, fetchResult{code: api.CodeOffsetOutOfRange, earliest: 0, latest: g.w.kafka.end(e.part)})
		return
	}
	g.w.check.served(e)
	g.finish(e, fetchResult{values: values, next: next})
}

// finish ends an admitted fetch with its answer.
func (g *gateway) finish(e *fetchEntry, r fetchResult) {
	e.done = true
	g.inflight.Remove(e.entry)
	g.w.check.ended(e)
	e.respond(r)
}

// cancel ends a fetch a revocation superseded. As in the real handler the
// broker call fails, the fetch is decided again (an expired capability
// gets token_expired, a fenced one capability_revoked), and a fetch that
// a later update allowed again still gets capability_revoked.
func (g *gateway) cancel(e *fetchEntry) {
	g.w.stats.Cancelled++
	code := g.recheck(e)
	if code == "" {
		code = api.CodeCapabilityRevoked
	}
	g.finish(e, fetchResult{code: code})
}

func (g *gateway) answer(req *fetchRequest, r fetchResult) {
	g.w.net.answer(g.node, req.from, req.call, func() { req.reply(r) })
}

// crash kills the gateway: its view and fetches are gone (their
// connections reset); it restarts after a while.
func (g *gateway) crash() {
	if !g.up {
		return
	}
	g.w.stats.GatewayCrashes++
	g.w.tracef("gateway %s crashed", g.id)
	for _, e := range g.fetches() {
		g.finish(e, fetchResult{transport: true})
	}
	g.up, g.view, g.polling = false, nil, false
	g.inc++
	g.w.after(g.w.between(10*time.Millisecond, max(g.w.prof.gatewayDown, 10*time.Millisecond)), evGatewayRestart, g.node, g.restart)
}

// stick makes the gateway apply no sync answer for d.
func (g *gateway) stick(d time.Duration) {
	g.w.stats.GatewayStuck++
	g.w.tracef("gateway %s stuck for %s", g.id, d)
	g.stuckUntil = max(g.stuckUntil, g.w.now+d)
}

func (g *gateway) restart() {
	if !g.up {
		g.boot()
	}
}
