package sim

import (
	"slices"
	"strconv"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/session"
)

// consumerState is a consumer process's life.
type consumerState uint8

const (
	consumerDown    consumerState = iota // not started, crashed or left
	consumerRunning                      // stepping
	consumerFrozen                       // stopped (SIGSTOP, GC pause): events wait
)

// consumer is one consumer process: the real session.Session (the SDK's
// core) driven by a model of its shell (package client): the join and
// rejoin loop, one long-poll heartbeat at a time, fetches that fail over
// between gateways and back off, commits and leave retried within
// request_timeout, the revoke hook, and a user who polls whenever records
// wait and commits now and then. A crash is kill -9 (no leave); a freeze
// holds every event until it thaws.
type consumer struct {
	w          *World
	idx        int
	node       int
	name       string
	instanceID string
	pattern    bool // subscribes by topic pattern
	state      consumerState
	inc        int // process incarnation; events of older ones are dropped
	s          *session.Session
	backlog    []func() // events that arrived while frozen

	joined    bool
	joining   bool
	joinCall  uint64
	joinRound int
	hbCall    uint64
	hbOn      bool
	hbRound   int
	nextCall  uint64
	fetches   map[uint64]*fetchCall // by session fetch id
	gwCurrent int
	tickGen   uint64
	tickAt    time.Time
	pollOn    bool
	ticket    uint64
}

// fetchCall is one session Fetch while the shell tries gateways for it.
type fetchCall struct {
	f         session.Fetch
	call      uint64 // the attempt in flight
	gw        int
	attempt   int
	round     int
	cancelled bool
}

// retryCall is a commit or leave retried until its deadline.
type retryCall struct {
	call     uint64
	deadline time.Duration
	round    int
	done     bool
	send     func()
	finish   func(code api.Code)
}

func newConsumer(w *World, i int) *consumer {
	c := &consumer{w: w, idx: i, node: w.consumerNode(i), name: "c" + strconv.Itoa(i)}
	if w.rng.Float64() < w.prof.static {
		c.instanceID = "instance-" + strconv.Itoa(i)
	}
	c.pattern = w.rng.Float64() < w.prof.pattern
	return c
}

// on runs fn for the incarnation inc: dropped if that process is gone,
// held while it is frozen.
func (c *consumer) on(inc int, fn func()) {
	switch {
	case c.inc != inc || c.state == consumerDown:
	case c.state == consumerFrozen:
		c.backlog = append(c.backlog, fn)
	default:
		fn()
	}
}

// later runs fn after d within this incarnation.
func (c *consumer) later(d time.Duration, fn func()) {
	inc := c.inc
	c.w.after(d, evConsumer, c.node, func() { c.on(inc, fn) })
}

func (c *consumer) sessionConfig() session.Config {
	p := c.w.prof.client
	return session.Config{
		BufferMaxBytes: p.bufferMaxBytes, PollMaxRecords: p.pollMaxRecords, RevokeTimeout: p.revokeTimeout,
		ExpiryMargin: p.expiryMargin, FullChecks: c.w.seed%4 == 0,
	}
}

// boot starts a new process: a fresh session, then join.
func (c *consumer) boot() {
	c.state = consumerRunning
	c.inc++
	c.s = session.New(c.sessionConfig())
	c.backlog = nil
	c.joined, c.joining, c.hbOn, c.pollOn = false, false, false, false
	c.fetches = map[uint64]*fetchCall{}
	c.tickAt = time.Time{}
	c.join()
	c.armCommit()
}

// step feeds the session one event and carries out its actions.
func (c *consumer) step(ev session.Event) {
	c.perform(c.s.Step(ev))
	c.armTick()
}

// perform carries out actions in order; CancelFetch actions (emitted in
// map order by the session) are carried out sorted after the rest, so
// runs are reproducible.
func (c *consumer) perform(actions []session.Action) {
	var cancels []uint64
	for _, a := range actions {
		switch a := a.(type) {
		case session.Fetch:
			c.startFetch(a)
		case session.CancelFetch:
			cancels = append(cancels, a.ID)
		case session.Deliver:
			c.deliver(a)
		case session.Commit:
			c.startCommit(a)
		case session.CallRevoke:
			if !a.Lost {
				id := a.ID
				c.later(c.w.between(0, c.w.prof.client.hookDelayMax), func() { c.step(session.HookDone{Now: c.w.wall(), ID: id}) })
			}
		case session.Rejoin:
			c.joined = false
			c.join()
		case session.Leave:
			c.startLeave(a)
		case session.Stop:
			c.stop()
		}
	}
	slices.Sort(cancels)
	for _, id := range cancels {
		c.cancelFetch(id)
	}
}

// armTick steps Tick at the session's deadline.
func (c *consumer) armTick() {
	if c.s == nil || c.state == consumerDown {
		return
	}
	at := c.s.NextDeadline()
	if at.IsZero() || (!c.tickAt.IsZero() && !at.Before(c.tickAt)) {
		return
	}
	c.tickAt = at
	c.tickGen++
	gen := c.tickGen
	c.later(at.Sub(c.w.wall()), func() {
		if c.tickGen == gen {
			c.tickAt = time.Time{}
			c.step(session.Tick{Now: c.w.wall()})
		}
	})
}

// join sends a join (again) until one succeeds.
func (c *consumer) join() {
	if c.joining || c.state == consumerDown {
		return
	}
	c.joining = true
	if c.w.tracing() {
		c.w.tracef("%s join sent (status %s)", c.name, c.s.Status())
	}
	c.nextCall++
	call, inc := c.nextCall, c.inc
	c.joinCall = call
	join := api.JoinRequest{InstanceID: c.instanceID, ClientID: c.name, Topics: c.w.prof.topics}
	if c.pattern {
		join.Topics, join.TopicPattern = nil, "orders|payments"
	}
	req := &request{kind: reqJoin, from: c.node, join: join, reply: func(r response) { c.on(inc, func() { c.joinAnswered(call, r) }) }}
	req.call = c.deadline(c.w.prof.client.requestTimeout, func() { c.joinAnswered(call, response{transport: true}) })
	c.w.net.request(c.node, coordNode, false, req.call, func() { c.w.coord.receive(req) })
}

// deadline is the call of a request that gives up after d with fn.
func (c *consumer) deadline(d time.Duration, fn func()) call {
	inc := c.inc
	return call{deadline: c.w.now + d, timeout: func() { c.on(inc, fn) }}
}

func (c *consumer) joinAnswered(call uint64, r response) {
	if !c.joining || c.joinCall != call {
		return
	}
	c.joining = false
	if c.w.tracing() {
		c.w.tracef("%s join answered: transport=%t code=%q member=%s grants=%d", c.name, r.transport, r.code, r.join.MemberID, len(r.join.Grants))
	}
	if failed(r.transport, r.code) {
		c.joinRound++
		c.later(c.backoff(c.joinRound), c.join)
		return
	}
	if r.code != "" {
		// The shell gives up for good (client rejoin: failLocked); the
		// process is as good as gone.
		c.w.stats.GaveUp++
		c.w.tracef("consumer %s gave up: join refused with %s", c.name, r.code)
		c.crash()
		return
	}
	c.joinRound = 0
	c.joined = true
	c.step(session.Joined{Now: c.w.wall(), Response: r.join})
	c.heartbeat()
}

// failed reports a transport error or a retriable refusal: try again.
func failed(transport bool, code api.Code) bool {
	return transport || (code != "" && api.IsRetriable(code))
}

// backoff is the shell's jittered exponential pause for round.
func (c *consumer) backoff(round int) time.Duration {
	p := c.w.prof.client
	d := p.retryBackoff << min(round, 20)
	if d <= 0 || d > p.retryBackoffMax {
		d = p.retryBackoffMax
	}
	return d/2 + c.w.between(0, d/2)
}

// heartbeat sends the one long-poll heartbeat.
func (c *consumer) heartbeat() {
	if c.hbOn || !c.joined || c.state == consumerDown || c.s.Status() == session.Stopped {
		return
	}
	member := c.s.Member()
	wait := c.s.HeartbeatWait(c.w.wall(), c.w.prof.client.heartbeatWait)
	if c.w.tracing() {
		c.w.tracef("%s heartbeat sent wait=%s", c.name, wait)
	}
	c.hbOn = true
	c.nextCall++
	call, inc := c.nextCall, c.inc
	c.hbCall = call
	req := &request{kind: reqHeartbeat, from: c.node, token: member.Token, wait: wait,
		reply: func(r response) { c.on(inc, func() { c.heartbeatAnswered(call, member.Incarnation, r) }) }}
	req.call = c.deadline(wait+c.w.prof.client.requestTimeout, func() { c.heartbeatAnswered(call, member.Incarnation, response{transport: true}) })
	c.w.net.request(c.node, coordNode, false, req.call, func() { c.w.coord.receive(req) })
}

func (c *consumer) heartbeatAnswered(call, incarnation uint64, r response) {
	if !c.hbOn || c.hbCall != call {
		return
	}
	c.hbOn = false
	if c.w.tracing() {
		c.w.tracef("%s heartbeat answered: transport=%t code=%q revoke=%v grants=%d renew=%d", c.name, r.transport, r.code, r.news.Revoke, len(r.news.Grants), len(r.news.Renew))
	}
	switch {
	case !r.transport && r.code == "":
		c.hbRound = 0
		c.step(session.NewsArrived{Now: c.w.wall(), Incarnation: incarnation, News: r.news})
		c.heartbeat()
		return
	case !r.transport:
		c.step(session.HeartbeatFailed{Now: c.w.wall(), Incarnation: incarnation, Code: r.code})
	}
	if !c.joined {
		return // a rejoin is under way; it restarts the heartbeats
	}
	c.hbRound++
	c.later(c.backoff(c.hbRound), c.heartbeat)
}

// startFetch runs one session Fetch.
func (c *consumer) startFetch(f session.Fetch) {
	fc := &fetchCall{f: f}
	c.fetches[f.ID] = fc
	c.sendFetch(fc)
}

func (c *consumer) sendFetch(fc *fetchCall) {
	c.nextCall++
	call, inc, gi := c.nextCall, c.inc, c.gwCurrent
	fc.call, fc.gw = call, gi
	p := c.w.prof.client
	req := &fetchRequest{from: c.node, token: fc.f.Capability, part: fc.f.Partition, offset: fc.f.Offset, maxWait: p.fetchMaxWait,
		reply: func(r fetchResult) { c.on(inc, func() { c.fetchAnswered(fc, call, r) }) }}
	req.call = c.deadline(p.fetchMaxWait+p.requestTimeout, func() { c.fetchAnswered(fc, call, fetchResult{transport: true}) })
	gw := c.w.gateways[gi]
	c.w.net.request(c.node, gw.node, true, req.call, func() { gw.receiveFetch(req) })
}

// fetchAnswered takes one attempt's answer: data or a final refusal go
// to the session; a retriable failure fails over or backs off
// (client/fetch.go).
func (c *consumer) fetchAnswered(fc *fetchCall, call uint64, r fetchResult) {
	if fc.call != call || c.fetches[fc.f.ID] != fc {
		return
	}
	fc.call = 0
	if c.w.tracing() {
		c.w.tracef("%s fetch %d %s@%d from %d answered: transport=%t code=%q records=%d", c.name, fc.f.ID, fc.f.Partition, fc.f.Epoch, fc.f.Offset, r.transport, r.code, len(r.values))
	}
	if fc.cancelled {
		delete(c.fetches, fc.f.ID)
		if c.w.opts.bugs.deliverAfterRevoke && !r.transport && r.code == "" && len(r.values) > 0 {
			c.w.check.delivered(c, session.Batch{Partition: fc.f.Partition, Epoch: fc.f.Epoch, Offset: fc.f.Offset,
				Next: r.next, Records: len(r.values), Payload: r.values})
		}
		return
	}
	switch {
	case !r.transport && r.code == "":
		delete(c.fetches, fc.f.ID)
		done := session.FetchDone{Now: c.w.wall(), ID: fc.f.ID, Partition: fc.f.Partition, Records: len(r.values),
			Bytes: int64(len(r.values)) * recordBytes, Next: r.next, Payload: r.values, Earliest: -1, Latest: -1}
		c.step(done)
		if len(r.values) > 0 {
			c.schedulePoll()
		}
	case r.transport || api.IsRetriable(r.code):
		c.retryFetch(fc, r.transport || r.code.Status() >= 500)
	default:
		delete(c.fetches, fc.f.ID)
		c.step(session.FetchDone{Now: c.w.wall(), ID: fc.f.ID, Partition: fc.f.Partition, Code: r.code,
			Earliest: r.earliest, Latest: r.latest})
	}
}

func (c *consumer) retryFetch(fc *fetchCall, failover bool) {
	n := len(c.w.gateways)
	if failover && c.gwCurrent == fc.gw {
		c.gwCurrent = (fc.gw + 1) % n
	}
	fc.attempt++
	if failover && fc.attempt%n != 0 {
		c.sendFetch(fc)
		return
	}
	fc.round++
	c.later(c.backoff(fc.round), func() {
		if c.fetches[fc.f.ID] == fc && !fc.cancelled && fc.call == 0 {
			c.sendFetch(fc)
		}
	})
}

// cancelFetch aborts a fetch; the session still gets its FetchDone.
func (c *consumer) cancelFetch(id uint64) {
	fc := c.fetches[id]
	if fc == nil || fc.cancelled {
		return
	}
	fc.cancelled = true
	if fc.call == 0 {
		delete(c.fetches, id)
	}
	part := fc.f.Partition
	c.later(0, func() { c.step(session.FetchDone{Now: c.w.wall(), ID: id, Partition: part, Canceled: true}) })
}

// deliver hands batches to the user; the user processes them and polls
// again, which acknowledges them.
func (c *consumer) deliver(d session.Deliver) {
	for _, b := range d.Batches {
		c.w.check.delivered(c, b)
	}
	if len(d.Batches) > 0 {
		c.schedulePoll()
	}
}

func (c *consumer) schedulePoll() {
	if c.pollOn {
		return
	}
	c.pollOn = true
	c.later(c.w.between(0, c.w.prof.client.pollDelayMax), func() {
		c.pollOn = false
		c.step(session.Polled{Now: c.w.wall()})
	})
}

// armCommit makes the user commit now and then.
func (c *consumer) armCommit() {
	c.later(c.w.between(c.w.prof.client.commitEvery/2, c.w.prof.client.commitEvery*3/2), func() {
		if c.joined && c.s.Status() == session.Active {
			c.ticket++
			c.step(session.CommitRequested{Now: c.w.wall(), Ticket: c.ticket})
		}
		c.armCommit()
	})
}

// startCommit sends a commit, retried within request_timeout.
func (c *consumer) startCommit(a session.Commit) {
	offsets := a.Offsets
	if c.w.opts.bugs.commitAhead {
		offsets = slices.Clone(offsets)
		for i := range offsets {
			if offsets[i].Offset >= 0 {
				offsets[i].Offset++ // planted bug: commits one record it never processed
			}
		}
	}
	body := api.CommitRequest{Offsets: offsets, Release: a.Release}
	id := a.ID
	c.retry(reqCommit, a.Token, body, func(code api.Code) {
		c.step(session.CommitDone{Now: c.w.wall(), ID: id, Code: code})
	})
}

// startLeave sends the leave, retried within request_timeout.
func (c *consumer) startLeave(a session.Leave) {
	c.retry(reqLeave, a.Token, api.CommitRequest{}, func(code api.Code) {
		if code == api.CodeUnknownMember {
			code = "" // already gone
		}
		c.step(session.LeaveDone{Now: c.w.wall(), Code: code})
	})
}

// retry sends a commit or leave until it succeeds, fails for good, or
// request_timeout passes (client/http.go retry).
func (c *consumer) retry(kind reqKind, token string, body api.CommitRequest, finish func(api.Code)) {
	rc := &retryCall{deadline: c.w.now + c.w.prof.client.requestTimeout, finish: finish}
	inc := c.inc
	var last api.Code = api.CodeUnavailable
	rc.send = func() {
		c.nextCall++
		id := c.nextCall
		rc.call = id
		req := &request{kind: kind, from: c.node, token: token, commit: body, call: call{deadline: rc.deadline},
			reply: func(r response) { c.on(inc, func() { c.retryAnswered(rc, id, r, &last) }) }}
		c.w.net.request(c.node, coordNode, true, req.call, func() { c.w.coord.receive(req) })
	}
	rc.send()
	c.later(rc.deadline-c.w.now, func() {
		if !rc.done {
			rc.done = true
			rc.finish(last)
		}
	})
}

func (c *consumer) retryAnswered(rc *retryCall, call uint64, r response, last *api.Code) {
	if rc.done || rc.call != call {
		return
	}
	rc.call = 0
	if c.w.tracing() {
		c.w.tracef("%s commit/leave answered transport=%t code=%q", c.name, r.transport, r.code)
	}
	if !failed(r.transport, r.code) {
		rc.done = true
		rc.finish(r.code)
		return
	}
	if !r.transport {
		*last = r.code
	}
	rc.round++
	d := c.backoff(rc.round)
	if c.w.now+d >= rc.deadline {
		return // the deadline answers with the last failure
	}
	c.later(d, func() {
		if !rc.done {
			rc.send()
		}
	})
}

// stop ends a session that left: the process exits.
func (c *consumer) stop() {
	c.state = consumerDown
	c.inc++
	c.s = nil
	c.w.tracef("consumer %s left", c.name)
}

// crash is kill -9: no leave, everything in flight is forgotten.
func (c *consumer) crash() {
	if c.state == consumerDown {
		return
	}
	c.w.stats.ConsumerCrashes++
	c.w.tracef("consumer %s crashed", c.name)
	c.state = consumerDown
	c.inc++
	c.s = nil
	c.backlog = nil
}

// close asks the session to hand everything over and leave.
func (c *consumer) close() {
	if c.state != consumerRunning || !c.joined {
		return
	}
	c.step(session.CloseRequested{Now: c.w.wall()})
}

// freeze stops the process for d; its events wait until it thaws.
func (c *consumer) freeze(d time.Duration) {
	if c.state != consumerRunning {
		return
	}
	c.w.stats.Freezes++
	c.state = consumerFrozen
	inc := c.inc
	c.w.after(d, evConsumer, c.node, func() {
		if c.inc == inc {
			c.thaw()
		}
	})
}

// thaw resumes a frozen process: what arrived meanwhile runs now, in order.
func (c *consumer) thaw() {
	if c.state != consumerFrozen {
		return
	}
	c.state = consumerRunning
	backlog := c.backlog
	c.backlog = nil
	for _, fn := range backlog {
		c.later(0, fn)
	}
}
