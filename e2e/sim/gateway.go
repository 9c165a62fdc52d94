package sim

import (
	"strconv"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/session"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/ocap"
)

// Sync client bounds, as gateway/sync.go.
const (
	syncBackoffMin  = 50 * time.Millisecond
	syncBackoffMax  = time.Second
	fetchRecordsMax = 50 // records one fetch answers at most (max_bytes)
)

func gatewayID(i int) string { return "gw-" + strconv.Itoa(i) }

// gateway is one gateway process: a real authz.View fed by a model of the
// sync client (gateway/sync.go), and the fetch path (gateway/records_fetch.go):
// sync check, verify (raising the fence on a newer capability), Decide,
// broker long poll, decide again, answer. Its clock is offset from true
// time by a constant within max_clock_skew. A restart loses the view; it
// refuses fetches until its first sync.
type gateway struct {
	w     *World
	idx   int
	node  int
	id    string
	skew  time.Duration
	up    bool
	inc   int
	view  *authz.View
	after uint64 // the seq the next poll acknowledges

	polling  bool
	pollID   uint64
	pollSent time.Duration // local clock
	synced   bool          // a poll succeeded in this incarnation
	lastGood time.Duration // local send time of the last successful poll
	backoff  time.Duration

	verified  map[string]bool // the verified-token cache
	inflight  []*fetchEntry   // admission order
	nextFetch uint64
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

// fetchEntry is a fetch between admission and its answer (or cancel).
type fetchEntry struct {
	gw       *gateway
	inc      int
	id       uint64
	claims   *ocap.Claims
	req      authz.Request
	part     int
	member   string
	admitted time.Duration
	done     bool
	respond  func(fetchResult)
}

func newGateway(w *World, i int) *gateway {
	return &gateway{w: w, idx: i, node: w.gatewayNode(i), id: gatewayID(i), skew: w.prof.gateway.skew[i]}
}

// local is the gateway's clock as a virtual time.
func (g *gateway) local() time.Duration { return g.w.now + g.skew }

func (g *gateway) localWall() time.Time { return base.Add(g.local()) }

// boot starts an incarnation with an empty view, not ready until synced.
func (g *gateway) boot() {
	g.up = true
	g.inc++
	g.view = authz.NewView(authz.Config{Leeway: g.w.prof.machine.Leeway})
	g.after, g.synced, g.polling, g.backoff = 0, false, false, syncBackoffMin
	g.verified = map[string]bool{}
	g.inflight = nil
	g.poll()
}

// poll sends GET /v1/sync; after acknowledges everything up to it.
func (g *gateway) poll() {
	g.pollID++
	id, inc := g.pollID, g.inc
	g.polling, g.pollSent = true, g.local()
	if g.w.tracing() {
		g.w.tracef("%s poll after=%d", g.id, g.after)
	}
	g.w.check.acked(g, g.after)
	timeout := func() {
		if g.up && g.inc == inc && g.polling && g.pollID == id {
			g.syncFailed() // the poll's context timed out
		}
	}
	req := &request{kind: reqSync, from: g.node, gateway: g.idx, inc: inc, sent: g.w.now, after: g.after, wait: g.w.prof.gateway.syncWait,
		call: call{deadline: g.w.now + g.w.prof.gateway.syncTimeout, timeout: timeout}, reply: func(r response) { g.onSync(inc, id, r) }}
	g.w.net.request(g.node, coordNode, true, req.call, func() { g.w.coord.receive(req) })
}

func (g *gateway) onSync(inc int, id uint64, r response) {
	if !g.up || g.inc != inc || !g.polling || g.pollID != id {
		return // an answer nobody waits for any more
	}
	g.polling = false
	if g.w.tracing() {
		g.w.tracef("%s sync answered transport=%t code=%q seq=%d reset=%t", g.id, r.transport, r.code, r.sync.Seq, r.sync.Reset)
	}
	if r.transport || r.code != "" {
		g.syncFailed()
		return
	}
	u := r.sync
	if !u.Reset && u.Seq < g.after {
		g.after = 0 // the coordinator forgot what we acknowledged: ask for a snapshot
		g.syncFailed()
		return
	}
	if g.w.opts.bugs.ackBeforeApply {
		g.ackThenApply(u)
		return
	}
	g.apply(u)
	g.after = u.Seq
	g.markSynced()
	g.poll()
}

// apply applies one update and cancels the fetches it supersedes.
func (g *gateway) apply(u api.SyncResponse) {
	now := g.localWall()
	changes, err := g.view.Apply(u, now)
	if err != nil {
		panic("sim: gateway: apply: " + err.Error())
	}
	for _, e := range g.victims(changes, now) {
		g.cancel(e)
	}
}

// ackThenApply is a planted bug: acknowledge first, apply later.
func (g *gateway) ackThenApply(u api.SyncResponse) {
	inc := g.inc
	g.after = u.Seq
	g.markSynced()
	g.poll()
	g.w.after(g.w.between(time.Millisecond, 2*time.Second), evGatewayPoll, g.node, func() {
		if g.up && g.inc == inc {
			g.apply(u)
		}
	})
}

func (g *gateway) markSynced() {
	g.synced, g.lastGood = true, g.pollSent
	g.backoff = syncBackoffMin
	g.w.check.resynced(g)
}

// victims are the in-flight fetches the view no longer allows after
// changes (gateway/inflight.go revoke).
func (g *gateway) victims(ch authz.Changes, now time.Time) []*fetchEntry {
	var out []*fetchEntry
	for _, e := range g.inflight {
		if !ch.Reset && !ch.Revoked && !raised(ch.Raised, e.claims) {
			continue
		}
		if authz.Decide(e.claims, e.req, g.view, now) != authz.Allow {
			out = append(out, e)
		}
	}
	return out
}

func raised(fences []api.Fence, c *ocap.Claims) bool {
	for _, f := range fences {
		if f.Group == c.Group && f.Topic == c.Topic && f.Partition == c.PartitionNumber() {
			return true
		}
	}
	return false
}

// syncFailed backs off (jittered, bounded) and polls again.
func (g *gateway) syncFailed() {
	g.polling = false
	d := g.backoff/2 + g.w.between(0, g.backoff/2)
	g.backoff = min(2*g.backoff, syncBackoffMax)
	inc := g.inc
	g.w.after(d, evGatewayPoll, g.node, func() {
		if g.up && g.inc == inc && !g.polling {
			g.poll()
		}
	})
}

// syncRefusal is the 503 code while the view cannot be vouched for:
// before the first sync, and once sync_timeout passed since the last
// successful poll was sent (gateway/auth.go).
func (g *gateway) syncRefusal() api.Code {
	switch {
	case !g.synced:
		return api.CodeNotReady
	case g.local()-g.lastGood > g.w.prof.gateway.syncTimeout && !g.w.opts.bugs.noSelfFence:
		return api.CodeOutOfSync
	}
	return ""
}

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
	g.nextFetch++
	part := g.w.kafka.index[req.part]
	e := &fetchEntry{gw: g, inc: g.inc, id: g.nextFetch, claims: claims, part: part,
		req:    authz.Request{Topic: req.part.Topic, Partition: req.part.Partition, Op: ocap.OpFetch, Offset: g.resolve(part, req.offset)},
		member: claims.Subject, admitted: g.w.now,
	}
	e.respond = func(r fetchResult) { g.answer(req, r) }
	g.inflight = append(g.inflight, e)
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
	case now.Unix() >= int64(claims.ExpiresAt)+int64(g.w.prof.machine.Leeway/time.Second):
		return nil, api.CodeTokenExpired
	}
	if !g.verified[req.token] {
		g.verified[req.token] = true
		if claims.Epoch != 0 && g.view.Raise(claims.Group, claims.Topic, claims.PartitionNumber(), claims.Epoch) {
			g.cancelBelow(claims)
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

// Offset words a fetch may carry instead of a number (gateway/query.go):
// Kafka's sentinels, sent by the SDK for a grant whose start offset the
// coordinator did not resolve.
const (
	offsetEarliest int64 = -2
	offsetLatest   int64 = -1
)

// resolve turns offset=earliest|latest into the log start or end, after
// the capability was checked (gateway/records_fetch.go resolveOffset).
func (g *gateway) resolve(part int, offset int64) int64 {
	switch offset {
	case offsetEarliest:
		return 0
	case offsetLatest:
		return g.w.kafka.end(part)
	}
	return offset
}

// cancelBelow cancels the fetches of c's partition under older epochs.
func (g *gateway) cancelBelow(c *ocap.Claims) {
	for _, e := range slicesClone(g.inflight) {
		if e.claims.Group == c.Group && e.claims.Topic == c.Topic && e.claims.PartitionNumber() == c.PartitionNumber() &&
			e.claims.Epoch != 0 && e.claims.Epoch < c.Epoch {
			g.cancel(e)
		}
	}
}

// brokerAnswered decides again, with the view and sync state of now, and
// answers.
func (g *gateway) brokerAnswered(e *fetchEntry) {
	if e.done || !g.up || g.inc != e.inc {
		return
	}
	if r := authz.Decide(e.claims, e.req, g.view, g.localWall()); r != authz.Allow {
		g.finish(e, fetchResult{code: r.Code()})
		return
	}
	if code := g.syncRefusal(); code != "" {
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
	g.remove(e)
	g.w.check.ended(e)
	e.respond(r)
}

// cancel ends a fetch a revocation superseded. As in the real handler the
// broker call fails, the fetch is decided again (an expired capability
// gets token_expired, a fenced one capability_revoked), and a fetch that
// a later update allowed again still gets capability_revoked.
func (g *gateway) cancel(e *fetchEntry) {
	g.w.stats.Cancelled++
	code := api.CodeCapabilityRevoked
	if r := authz.Decide(e.claims, e.req, g.view, g.localWall()); r != authz.Allow {
		code = r.Code()
	} else if refusal := g.syncRefusal(); refusal != "" {
		code = refusal
	}
	g.finish(e, fetchResult{code: code})
}

func (g *gateway) remove(e *fetchEntry) {
	for i, x := range g.inflight {
		if x == e {
			g.inflight = append(g.inflight[:i], g.inflight[i+1:]...)
			return
		}
	}
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
	for _, e := range slicesClone(g.inflight) {
		g.finish(e, fetchResult{transport: true})
	}
	g.up, g.view, g.polling = false, nil, false
	g.inc++
	g.w.after(g.w.between(10*time.Millisecond, max(g.w.prof.gatewayDown, 10*time.Millisecond)), evGatewayRestart, g.node, g.restart)
}

func (g *gateway) restart() {
	if !g.up {
		g.boot()
	}
}

func slicesClone(s []*fetchEntry) []*fetchEntry { return append([]*fetchEntry(nil), s...) }
