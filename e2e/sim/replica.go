package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/coordinator/leader"
	"github.com/capgate/capgate/internal/coordinators"
	"github.com/capgate/capgate/store"
)

// Coordinator replicas (issue #11, DESIGN §9). With Options.Replicas > 1
// the world runs that many coordinator processes over ONE store.MemLog
// (the shard's Kafka log, with its producer-epoch fencing). Each replica
// runs the replica shell's own decisions, coordinator/leader.Replica (the
// code coordinator/replica*.go runs: which commits count, the Elector's
// actions and their outcomes, a lapsed lease renewed by a beat, the
// view, which requests get not_leader, which answers wait for the log's
// confirmation), and this file is its IO: a follower tails the log
// (store.Follower on the MemLog, read when the replica's timer fires) and
// its position is Observed; Promote is store.Follower.Promote (fence,
// barrier, read to the end), after which the replica restores its
// machine from the promoted LogStore exactly as a restarted coordinator
// does (coordinator.serve); Beat is store.LogStore.Beat; a persist of a
// Ready that fails (fenced by a newer writer, or a failed transaction, or
// one whose answer was lost) fails the driver closed — nothing of that
// Ready is sent — and is stepped as Wrote; StepDown drops the machine and
// follows again. Answers leader.MustConfirm names leave only after
// store.WriteMark.Confirm, marked when the request arrived (as
// coordinator/sync.go and heartbeat.go do).
//
// The faults: a replica (the leader more often than not) is killed and
// restarted later as a follower; a replica is paused (SIGSTOP) and
// resumed — a zombie: what reached it meanwhile and its timers run when
// it resumes, in an order drawn by the seed, some before it looks at its
// lease, some after; a follower's reader lags now and then (it decides
// before catching up), so two replicas stand for the same silence and
// race to take over; the log fails a transaction (aborted, or
// committed with its answer lost); and, where the lease follows the
// log's pace (leaseMax), a beat's transaction is slow (beatLater).
//
// Clients hold the list of replicas and pick one with the clients' own
// decision, internal/coordinators.List (the SDK's and the gateways'): a
// replica that does not lead answers not_leader with the leader it knows
// (DESIGN §5), and the sender follows the hint at once, or tries the next
// replica (as after a refused connection or a timeout); after a whole
// round of misses its caller gets the failure and backs off. The
// consumers' and gateways' other decisions (client/driver, gateway/guard)
// see only the final answer.

// replica is one coordinator replica's leadership side: the shell's
// decisions (core) and the IO they drive.
type replica struct {
	cfg      leader.Config
	core     *leader.Replica
	counted  leader.Stats    // core's counts already in the world's stats
	follower *store.Follower // while not leading
	st       *store.LogStore // while leading (until stepped down)
	paused   bool            // SIGSTOP: nothing of it runs
	backlog  []pending       // what reached it or fell due while paused
	beatGen  uint64          // the armed leadership timer's generation
	// deposed: another replica's takeover fenced this one's leadership
	// at deposedAt (for checker 8; the replica itself learns it from the
	// log).
	deposed   bool
	deposedAt time.Duration
	// checked and checkedAt: the follower and the offset it had read to
	// at its last Check (checkFit), which depends only on what it read.
	checked   *store.Follower
	checkedAt int64
	// wroteAt: when the leader's last write (its barrier, a beat)
	// committed (wroteBeat).
	wroteAt time.Time
}

// pending is what waits for a paused replica: a request that reached it
// (answered with a reset connection if it dies first), or a timer.
type pending struct {
	req *request
	fn  func()
}

// replicaID names replica i in the log (WriterID) and its beats.
func replicaID(i int) string { return "replica-" + strconv.Itoa(i+1) }

// replicaURL is replica i's advertised URL (the hint its beats carry).
func replicaURL(i int) string { return "http://" + replicaID(i) }

// replicaNode is replica i's network node: the first is the coordinator
// node, the others come after the admin node (so a world without
// replicas keeps its numbering and traces).
func (w *World) replicaNode(i int) int {
	if i == 0 {
		return coordNode
	}
	return w.adminNode() + i
}

// replicaSettings are the replicas' leadership settings and fault rates,
// drawn from their own stream of the seed (a world without replicas
// draws nothing more).
type replicaSettings struct {
	count      int
	beat       time.Duration
	lease      time.Duration
	stagger    []time.Duration
	lag        float64       // chance a follower decides before catching up
	writeFail  float64       // chance per persist that the log fails the transaction
	pauseEvery time.Duration // mean time between pauses of a replica (0: none)
	// leaseMax: how far the log's pace stretches the lease
	// (leader.Config.LeaseTimeoutMax, replica.lease_timeout_max; 0:
	// fixed); with it, a beat's transaction takes up to slowBeatMax with
	// chance slowBeat (a starved log, ha13), so leases lapse while the
	// beat still commits.
	leaseMax    time.Duration
	slowBeat    float64
	slowBeatMax time.Duration
}

func drawReplicas(seed uint64, count int) replicaSettings {
	d := draw{rand.New(rand.NewPCG(seed, 0x4e91_1ca5))}
	r := replicaSettings{count: count, beat: d.dur(200*time.Millisecond, 800*time.Millisecond)}
	r.lease = d.dur(3*r.beat, 4*time.Second)
	for range count {
		r.stagger = append(r.stagger, d.dur(0, r.lease/4))
	}
	r.lag = 0.3 * d.rng.Float64()
	if d.rng.IntN(4) != 0 {
		r.writeFail = 0.01 * d.rng.Float64()
	}
	if d.rng.IntN(4) != 0 {
		r.pauseEvery = d.dur(30*time.Second, 120*time.Second)
	}
	if d.rng.IntN(2) == 0 { // after the draws above: they stay what they were
		r.leaseMax = d.dur(r.lease+r.beat, 3*r.lease)
		r.slowBeat, r.slowBeatMax = 0.1+0.15*d.rng.Float64(), d.dur(r.lease, 5*r.lease/2)
	}
	return r
}

// longestLease is the longest a replica's lease runs: stretched to
// leaseMax, and a barrier's (a takeover in progress) is leaseMax.
func (r replicaSettings) longestLease() time.Duration { return max(r.lease, r.leaseMax) }

// newReplicas makes count coordinator replicas over one log.
func (w *World) newReplicas(count int) {
	log := store.NewMemLog()
	for i := range count {
		c := newCoordinator(w, i, log)
		if count > 1 {
			c.rep = &replica{cfg: leader.Config{ID: replicaID(i), BeatInterval: w.prof.replicas.beat,
				LeaseTimeout: w.prof.replicas.lease, LeaseTimeoutMax: w.prof.replicas.leaseMax, Stagger: w.prof.replicas.stagger[i]}}
		}
		w.coords = append(w.coords, c)
	}
	w.coord = w.coords[0]
}

// follow starts the replica as a follower: tail the log, give a live
// leader a lease to show itself.
func (c *coordinator) follow() {
	f, err := store.FollowMem(context.Background(), c.log, c.logOptions())
	if err != nil {
		c.w.fail("replica", "%s: follow: %v", c.rep.cfg.ID, err)
		return
	}
	c.up = true
	c.inc++
	c.rep.follower = f
	c.rep.core, c.rep.counted = leader.NewReplica(c.rep.cfg, replicaURL(c.idx), c.w.wall()), leader.Stats{}
	c.w.tracef("%s follows", c.rep.cfg.ID)
	c.w.live.fault()
	c.lead()
}

// view is what the replica answers with: the decisions' view, not
// serving once its driver failed closed (the shell's Coordinator answers
// 503 then, until the step-down the failure causes).
func (c *coordinator) view() leader.View {
	if c.rep.core == nil {
		return leader.View{}
	}
	v := c.rep.core.View()
	if c.d == nil || c.d.Stopped() {
		v.Serving = false
	}
	return v
}

// isLeader: the replica believes it leads (for the counts and the trace).
func (c *coordinator) isLeader() bool {
	return c.up && c.rep.core != nil && c.rep.core.Role() == leader.Leader
}

// whenRunning defers fn while the replica is paused.
func (c *coordinator) whenRunning(fn func()) func() {
	if c.rep == nil {
		return fn
	}
	return func() {
		if c.rep.paused {
			c.rep.backlog = append(c.rep.backlog, pending{fn: fn})
			return
		}
		fn()
	}
}

// lead is the replica's leadership step: read the log (unless the reader
// lags this time), observe its position, then carry out every action the
// decisions ask for, and arm the timer for the next.
func (c *coordinator) lead() {
	r := c.rep
	if !c.up || r.paused {
		return
	}
	now := c.w.wall()
	if r.follower != nil && !(!c.w.healed && c.w.chance(c.w.prof.replicas.lag)) {
		c.observe(now)
	}
	var d leader.Decision
	core := r.core
	defer c.tally()
	for range 8 { // each action's outcome is stepped at once; a few rounds settle it
		d = core.Next(now)
		if d.Do == leader.None {
			break
		}
		c.act(now, d)
		if !c.up || r.core != core {
			return
		}
	}
	next := c.w.prof.replicas.beat / 2 // a follower reads the log this often
	if !d.At.IsZero() {
		next = min(next, max(d.At.Sub(now), time.Millisecond))
	}
	r.beatGen++
	gen := r.beatGen
	c.w.after(next, evReplica, c.node, c.whenRunning(func() {
		if c.up && r.core == core && r.beatGen == gen {
			c.lead()
		}
	}))
}

// tally adds what the replica's decisions counted since the last tally
// to the world's stats.
func (c *coordinator) tally() {
	r := c.rep
	if r.core == nil {
		return
	}
	s := r.core.Stats()
	c.w.stats.Takeovers += s.Takeovers - r.counted.Takeovers
	c.w.stats.StepDowns += s.StepDowns - r.counted.StepDowns
	c.w.stats.FencedWrites += s.FencedWrites - r.counted.FencedWrites
	r.counted = s
}

// observe reads the log to its current end and steps what was applied.
func (c *coordinator) observe(now time.Time) {
	r := c.rep
	if err := r.follower.CatchUp(); err != nil {
		c.w.fail("replica", "%s: catch up: %v", r.cfg.ID, err)
		return
	}
	pos, _ := r.follower.Position()
	if c.w.opts.bugs.barriersUncounted {
		pos.Barriers = 0 // planted bug: what the sim did before the once-only barrier rule reached it
	}
	r.core.Observe(now, leader.Position{Commits: pos.Commits, Barriers: pos.Barriers, Writer: pos.Writer, Leader: leader.Hint{ID: pos.Leader.ID, URL: pos.Leader.URL}})
	c.checkFit(now)
}

// act carries out one of the decisions' actions and steps its outcome.
func (c *coordinator) act(now time.Time, d leader.Decision) {
	r := c.rep
	switch d.Do {
	case leader.Promote:
		var stale *store.Snapshot
		if c.w.opts.bugs.serveBeforeLogEnd {
			// Planted bug: the candidate restores its machine from what
			// its follower had applied BEFORE the takeover read the log
			// to its end.
			stale, _ = r.follower.Load()
		}
		st, err := r.follower.Promote(context.Background())
		if err != nil {
			c.takeoverFailed(now, err)
			return
		}
		for _, o := range c.w.coords {
			if o != c && o.isLeader() {
				c.w.stats.Contested++ // it deposes a replica that still believes it leads
			}
			if o != c && o.rep.st != nil && !o.rep.deposed {
				o.rep.deposed, o.rep.deposedAt = true, c.w.now
			}
		}
		if c.unfitMode() == unfitBroken {
			// Fenced, barrier committed, and then the machine cannot be
			// built (the shell closes the promoted log).
			_ = st.Close()
			c.w.stats.BrokenTakeovers++
			c.takeoverFailed(now, errBroken)
			return
		}
		if !c.fit() {
			c.w.fail("an unfit replica never leads", "%s (%s) took the log over", r.cfg.ID, c.unfitMode())
		}
		r.follower, r.st = nil, st
		r.core.Promoted(now, nil, false) // nothing runs between here and serving
		r.wroteAt = now                  // the barrier committed
		c.w.bootLate()
		c.w.tracef("%s leads", r.cfg.ID)
		c.serve(st, stale) // its first flush may crash the replica
	case leader.Beat:
		if !c.w.healed && c.w.chance(c.w.prof.replicas.slowBeat) {
			c.beatLater(c.w.between(c.w.prof.replicas.slowBeatMax/4, c.w.prof.replicas.slowBeatMax))
			return
		}
		c.beatFault()
		err := r.st.Beat(replicaURL(c.idx))
		r.core.Wrote(now, true, err, errors.Is(err, store.ErrFenced))
		c.wroteBeat(now, err)
	case leader.StepDown:
		c.w.tracef("%s steps down: %s", r.cfg.ID, d.Reason)
		c.stopServing()
		if !c.followAgain() {
			return
		}
		r.core.Stopped(now)
	}
}

// beatLater writes a beat whose transaction takes d (a starved log):
// it commits, and its outcome is stepped, d from now — meanwhile the
// leader asks for no other beat, and its lease may lapse (a stretched
// one, leader.Config.LeaseTimeoutMax, outlasts the beat). A step-down
// meanwhile closes its store: the beat then fails (a Close cuts short
// the write in flight) and the step-down finishes after its outcome.
// It dies with the process.
func (c *coordinator) beatLater(d time.Duration) {
	r := c.rep
	core, st := r.core, r.st
	c.w.stats.SlowBeats++
	c.w.after(d, evReplica, c.node, c.whenRunning(func() {
		if !c.up || r.core != core {
			return
		}
		if r.st == st {
			// Only a store still writing meets the log's fault: a closed
			// one fails before the log, and a fault armed for it would
			// strike the next writer's Ready (writeFault's lost answer is
			// the sim's own, so the checkers see what the log holds).
			c.beatFault()
		}
		now := c.w.wall()
		err := st.Beat(replicaURL(c.idx))
		core.Wrote(now, true, err, errors.Is(err, store.ErrFenced))
		c.wroteBeat(now, err)
		c.lead()
	}))
}

// wroteBeat counts a beat that committed more than twice a lease after
// the leader's last write while it kept leading: a fixed lease would
// have stepped it down (its renewal due one lease after the lapse), the
// log's pace stretched it (Stats.StretchedLeases).
func (c *coordinator) wroteBeat(now time.Time, err error) {
	r := c.rep
	if err != nil {
		return
	}
	if now.Sub(r.wroteAt) > 2*r.cfg.LeaseTimeout && r.core.Role() == leader.Leader {
		c.w.stats.StretchedLeases++
	}
	r.wroteAt = now
}

// takeoverFailed steps a failed Promote as the shell's outcome does: an
// ErrIncompatible one makes the replica unfit (it stops trying), and it
// follows the log with a new follower (the old one is spent or suspect).
func (c *coordinator) takeoverFailed(now time.Time, err error) {
	r := c.rep
	r.core.Promoted(now, err, errors.Is(err, store.ErrFenced))
	c.w.tracef("%s: promote failed: %v", r.cfg.ID, err)
	if errors.Is(err, store.ErrIncompatible) {
		c.markUnfit(now, err)
	}
	_ = r.follower.Close()
	if c.followAgain() {
		c.checkFit(now)
	}
}

// followAgain opens a new follower of the log (its commits count from
// zero); false when it could not (the world failed).
func (c *coordinator) followAgain() bool {
	r := c.rep
	f, err := store.FollowMem(context.Background(), c.log, c.logOptions())
	if err != nil {
		c.w.fail("replica", "%s: follow: %v", r.cfg.ID, err)
		return false
	}
	r.follower = f
	r.core.Following()
	return true
}

// stopServing drops the machine: every request it held is answered
// Unavailable (a reset connection to its client), its timers die with
// the incarnation.
func (c *coordinator) stopServing() {
	if c.d != nil {
		c.d.Close()
	}
	if c.rep.st != nil {
		_ = c.rep.st.Close()
	}
	c.d, c.rep.st, c.pending = nil, nil, nil
	c.rep.deposed = false
	c.inc++
	c.flushOn, c.tickOn = false, false
}

// writeFailed: the driver failed closed on a persist (nothing of the
// Ready was sent); the Elector steps down.
func (c *coordinator) writeFailed(err error) {
	c.w.tracef("%s: persist failed: %v", c.rep.cfg.ID, err)
	c.rep.core.Wrote(c.w.wall(), false, err, errors.Is(err, store.ErrFenced))
	c.lead()
}

// writeFault makes the log fail the coming transaction of a Ready, at
// the seed's rate (replicas only): aborted (nothing committed; the store
// fails and the driver fails closed), or committed while the writer
// hears an error (the answer to EndTxn lost). The second is carried out
// here rather than in store.MemLog, so the checkers still see what the
// log holds: the persist succeeds, nothing of the Ready is sent (as
// after a crash between persist and send), and the leader steps down.
// Beats meet the MemLog's own lost answer (beatFault).
func (c *coordinator) writeFault() {
	if c.rep == nil || c.w.healed || !c.w.chance(c.w.prof.replicas.writeFail) {
		return
	}
	c.w.stats.WriteFaults++
	c.w.live.fault()
	if c.w.chance(0.5) {
		c.lostAnswer, c.muted = true, true
		return
	}
	c.log.Fail(0, store.MemAbort)
}

// beatFault makes the log commit the coming beat while its writer hears
// an error, at the seed's rate.
func (c *coordinator) beatFault() {
	if !c.w.healed && c.w.chance(c.w.prof.replicas.writeFail) {
		c.w.stats.WriteFaults++
		c.w.live.fault()
		c.log.Fail(0, store.MemLoseAnswer)
	}
}

// errLostAnswer is the error a writer hears when its transaction's
// answer is lost.
var errLostAnswer = errors.New("sim: the answer to the log's commit was lost")

// forgetReplica drops a crashed replica's leadership state.
func (c *coordinator) forgetReplica() {
	if c.rep == nil {
		return
	}
	if c.rep.follower != nil {
		_ = c.rep.follower.Close()
	}
	for _, p := range c.rep.backlog {
		if p.req != nil {
			c.respond(p.req, response{transport: true}) // the connection dies with the process
		}
	}
	c.tally()
	c.w.live.fault()
	c.rep.follower, c.rep.st, c.rep.core = nil, nil, nil
	c.rep.paused, c.rep.backlog, c.rep.deposed = false, nil, false
}

// routed answers req itself unless the replica's decision (the one
// coordinator/replica_http.go makes) routes it to the machine: done when
// it answered; else the log's mark, taken before the machine sees the
// request (coordinator/sync.go's leadershipMark).
func (c *coordinator) routed(req *request) (mark store.WriteMark, done bool) {
	v := c.view()
	if v.Route(req.kind.path()) == leader.RouteServe {
		return c.rep.st.Mark(), false
	}
	c.notLeader(req, v.Leader.URL)
	return store.WriteMark{}, true
}

// arrival is one delivery of a request to a coordinator: when, and the
// log's mark then (replicas).
type arrival struct {
	at   time.Duration
	mark store.WriteMark
}

// path is the route a request kind is sent to (coordinator/router.go).
func (k reqKind) path() string {
	switch k {
	case reqJoin:
		return "/v1/groups/" + groupName + "/join"
	case reqHeartbeat:
		return "/v1/groups/" + groupName + "/heartbeat"
	case reqCommit:
		return "/v1/groups/" + groupName + "/commit"
	case reqLeave:
		return "/v1/groups/" + groupName + "/leave"
	case reqSync:
		return "/v1/sync"
	case reqRevoke:
		return "/v1/admin/groups/" + groupName + "/partitions/t/0/revoke"
	case reqDeny:
		return "/v1/admin/capabilities/jti/revoke"
	case reqGatewayLeave:
		return "/v1/sync/leave"
	case reqRevokeMember:
		return "/v1/admin/groups/" + groupName + "/members/m/revoke"
	}
	panic(fmt.Sprintf("sim: request kind %d has no route", k))
}

// notLeader answers a request this replica does not serve, naming hint
// ("": no leader known).
func (c *coordinator) notLeader(req *request, hint string) {
	c.w.net.answer(c.node, req.from, req.call, func() { c.w.redirected(req, c.idx, hint) })
}

// pause stops a replica (the leader more often than not) for a while:
// mostly past the lease, so the others take over and it resumes a
// zombie.
func (w *World) pause() {
	c := w.pickReplica()
	if c == nil || c.rep.paused {
		return
	}
	lease := w.prof.replicas.lease
	d := w.between(lease+time.Second, 3*lease+2*time.Second)
	if w.chance(0.2) {
		d = w.between(100*time.Millisecond, lease)
	}
	w.stats.Pauses++
	w.live.fault()
	c.rep.paused = true
	core := c.rep.core
	w.tracef("%s paused for %s", c.rep.cfg.ID, d)
	w.after(d, evReplica, c.node, func() {
		if c.up && c.rep.core == core {
			c.resume()
		}
	})
}

// resume continues a paused replica: what reached it and what fell due
// runs now, its own leadership step before or after it (as a process's
// goroutines race at SIGCONT).
func (c *coordinator) resume() {
	r := c.rep
	if !r.paused {
		return
	}
	r.paused = false
	c.w.live.fault()
	backlog := r.backlog
	r.backlog = nil
	c.w.tracef("%s resumed (%d waiting)", r.cfg.ID, len(backlog))
	first := c.w.chance(0.5)
	if first {
		c.lead()
	}
	for _, p := range backlog {
		if p.req != nil {
			c.receive(p.req)
		} else {
			p.fn()
		}
	}
	if !first {
		c.lead()
	}
}

// pickReplica draws a running replica, the leader with odds 2 in 3.
func (w *World) pickReplica() *coordinator {
	var up []*coordinator
	for _, c := range w.coords {
		if c.up {
			if w.chance(0.66) && c.isLeader() {
				return c
			}
			up = append(up, c)
		}
	}
	if len(up) == 0 {
		return nil
	}
	return up[w.rng.IntN(len(up))]
}

// crashReplica kills a replica.
func (w *World) crashReplica() {
	if c := w.pickReplica(); c != nil {
		c.crash()
	}
}

// sendCoordinator sends req from its sender to the replica its
// coordinator list (internal/coordinators, the clients' own decision)
// makes current; without replicas, to the one coordinator.
func (w *World) sendCoordinator(from int, dupable bool, req *request) {
	c := w.coords[0]
	if len(w.coords) > 1 {
		list := w.listOf(from)
		c = w.coords[w.replicaAt(list.Current())]
		if req.hops == 0 && req.call.timeout != nil {
			// A call that times out counts as a failure of that replica.
			timeout, to := req.call.timeout, replicaURL(c.idx)
			req.call.timeout = func() {
				list.Failed(to)
				timeout()
			}
		}
	}
	w.net.request(from, c.node, dupable, req.call, func() { c.receive(req) })
}

// listOf is the sender's coordinator list, every replica's URL in order.
func (w *World) listOf(node int) *coordinators.List {
	if l := w.lists[node]; l != nil {
		return l
	}
	var urls []string
	for i := range w.coords {
		urls = append(urls, replicaURL(i))
	}
	l, err := coordinators.New(urls)
	if err != nil {
		panic("sim: " + err.Error())
	}
	w.lists[node] = l
	return l
}

// replicaAt is the index of the replica at url.
func (w *World) replicaAt(url string) int {
	for i := range w.coords {
		if replicaURL(i) == url {
			return i
		}
	}
	panic("sim: no replica at " + url)
}

// answered delivers replica from's answer to its sender, telling the
// sender's list whether the replica answered or failed.
func (w *World) answered(req *request, from int, resp response) {
	list := w.listOf(req.from)
	if resp.transport {
		list.Failed(replicaURL(from))
	} else {
		list.Succeeded(replicaURL(from))
	}
	req.reply(resp)
}

// redirected: replica from answered not_leader naming hint ("":
// unknown). The list decides: the hinted replica at once, or the next
// one; when a whole round missed it says back off, and the caller gets
// the failure (its own retry backs off, as the SDK's and the gateway's
// do).
func (w *World) redirected(req *request, from int, hint string) {
	w.stats.NotLeader++
	_, backoff := w.listOf(req.from).NotLeader(replicaURL(from), hint)
	req.hops++
	if backoff {
		req.reply(response{transport: true})
		return
	}
	w.sendCoordinator(req.from, false, req)
}

// leaders lists the replicas that believe they lead (for the trace).
func (w *World) leaders() string {
	var ids []string
	for _, c := range w.coords {
		if c.rep != nil && c.isLeader() {
			ids = append(ids, c.rep.cfg.ID)
		}
	}
	slices.Sort(ids)
	return fmt.Sprint(ids)
}

// confirmed: an answer leader.MustConfirm names leaves only once a log
// transaction begun after the request arrived committed
// (store.WriteMark.Confirm, marked in routed), as the replica shell
// does — a leader deposed while it had nothing to write would otherwise
// answer from memory (resets older than fences the new leader
// published: the sweep found them). A deposed leader's confirmation
// fails fenced: it answers not_leader naming nobody, as the shell does,
// and its next write fails fenced too (the store stays failed), which
// steps it down.
func (c *coordinator) confirmed(at arrival, msg group.Message) bool {
	if !leader.MustConfirm(answerKind(msg)) {
		return true
	}
	if c.w.opts.bugs.answerUnconfirmed {
		return true // planted bug: answers from memory without asking the log
	}
	return at.mark.Confirm() == nil
}

// answerKind classifies a machine message the way the handlers do
// (coordinator/sync.go, heartbeat.go).
func answerKind(msg group.Message) leader.Answer {
	switch m := msg.(type) {
	case group.SyncReply:
		return leader.AnswerSync
	case group.News:
		if len(m.Grants)+len(m.Renew) > 0 {
			return leader.AnswerCapabilities
		}
		return leader.AnswerNews
	}
	return leader.AnswerPersisted
}
