package sim

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/driver"
	"github.com/capgate/capgate/client/session"
)

// consumerState is a consumer process's life.
type consumerState uint8

const (
	consumerDown    consumerState = iota // not started, crashed or left
	consumerRunning                      // stepping
	consumerFrozen                       // stopped (SIGSTOP, GC pause): events wait
)

// consumer is one consumer process: the real SDK decisions
// (client/driver around the client/session core: joins and rejoins, one
// long-poll heartbeat, fetch failover and backoff, commit and leave
// retries, cancelled fetches) whose commands are carried out over the
// simulated network instead of HTTP goroutines, and a user who polls
// whenever records wait and commits now and then. A crash is kill -9 (no
// leave); a freeze holds every event until it thaws.
type consumer struct {
	w          *World
	idx        int
	node       int
	name       string
	instanceID string
	pattern    bool // subscribes by topic pattern
	state      consumerState
	inc        int // process incarnation; events of older ones are dropped
	d          *driver.Driver
	backlog    []func() // events that arrived while frozen

	joined  bool
	tickGen uint64
	tickAt  time.Time
	pollOn  bool
	ticket  uint64
}

func newConsumer(w *World, i int) *consumer {
	c := &consumer{w: w, idx: i, node: w.consumerNode(i), name: "c" + strconv.Itoa(i)}
	if w.rng.Float64() < w.prof.static {
		c.instanceID = "instance-" + strconv.Itoa(i)
	}
	c.pattern = w.rng.Float64() < w.prof.pattern
	return c
}

// member is the current member id ("" before the first join).
func (c *consumer) member() string {
	if c.d == nil {
		return ""
	}
	return c.d.Session().Member().ID
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

func (c *consumer) driverConfig() driver.Config {
	p := c.w.prof.client
	join := api.JoinRequest{InstanceID: c.instanceID, ClientID: c.name, Topics: c.w.prof.topics}
	if c.pattern {
		join.Topics, join.TopicPattern = nil, "orders|payments"
	}
	b := c.w.opts.bugs
	return driver.Config{
		Join: join, Gateways: len(c.w.gateways),
		HeartbeatWait: p.heartbeatWait, FetchMaxWait: p.fetchMaxWait, RequestTimeout: p.requestTimeout,
		Replicas:     c.w.opts.Replicas > 1, // the SDK's, given every replica's URL
		RetryBackoff: p.retryBackoff, RetryBackoffMax: p.retryBackoffMax,
		MemberRenew: c.w.prof.memberRenew,
		Session: session.Config{
			BufferMaxBytes: p.bufferMaxBytes, PollMaxRecords: p.pollMaxRecords, RevokeTimeout: p.revokeTimeout,
			ExpiryMargin: p.expiryMargin, FullChecks: c.w.seed%4 == 0,
			// One seed in three also commits on the session's timer.
			CommitInterval: timedCommits(c.w.seed, p.commitEvery),
		},
		Rand: c.w.rng.Int64N,
		Bugs: driver.Bugs{DeliverAfterRevoke: b.deliverAfterRevoke, CommitAhead: b.commitAhead},
	}
}

// boot starts a new process: a fresh driver, then join.
func (c *consumer) boot() {
	c.state = consumerRunning
	c.inc++
	c.d = driver.New(c.driverConfig())
	c.backlog = nil
	c.joined, c.pollOn = false, false
	c.tickAt = time.Time{}
	c.carry(c.d.Start(c.w.wall()))
	c.armCommit()
}

// carry carries out the driver's commands in order, then follows its
// next deadline.
func (c *consumer) carry(cmds []driver.Command) {
	for _, cmd := range cmds {
		if c.state == consumerDown {
			return
		}
		switch cmd := cmd.(type) {
		case driver.Send:
			c.send(cmd)
		case session.Deliver:
			c.deliver(cmd)
		case session.CallRevoke:
			if !cmd.Lost {
				id := cmd.ID
				c.later(c.w.between(0, c.w.prof.client.hookDelayMax), func() { c.carry(c.d.User(session.HookDone{Now: c.w.wall(), ID: id})) })
			}
		case driver.JoinResult:
			if cmd.Err != nil {
				c.giveUp(cmd.Err)
				return
			}
			c.joined = true
		case driver.Failed:
			c.giveUp(cmd.Err)
			return
		case session.Stop:
			c.stop()
			return
		}
		// Cancel: the answer is dropped by the driver when it comes, as
		// a cancelled context's would be.
	}
	c.armTick()
}

// giveUp: the SDK stopped for good (the first join failed, a rejoin was
// refused); the process exits.
func (c *consumer) giveUp(err error) {
	c.w.stats.GaveUp++
	c.w.tracef("consumer %s gave up: %v", c.name, err)
	c.crash()
}

// armTick steps the driver's Tick at its next deadline.
func (c *consumer) armTick() {
	if c.d == nil || c.state == consumerDown {
		return
	}
	at := c.d.NextDeadline()
	if at.IsZero() || (!c.tickAt.IsZero() && !at.Before(c.tickAt)) {
		return
	}
	c.tickAt = at
	c.tickGen++
	gen := c.tickGen
	c.later(at.Sub(c.w.wall()), func() {
		if c.tickGen == gen {
			c.tickAt = time.Time{}
			c.carry(c.d.Tick(c.w.wall()))
		}
	})
}

// send carries out one attempt over the network: to the coordinator, or
// for a fetch to the gateway the driver named. Its answer, or a transport
// failure at its Timeout, goes back to the driver.
func (c *consumer) send(s driver.Send) {
	inc, id, kind := c.inc, s.Call, s.Kind
	answered := false
	answer := func(a *driver.Answered) {
		c.on(inc, func() {
			if !answered {
				answered = true
				a.Now, a.Call = c.w.wall(), id
				if c.w.tracing() {
					c.w.tracef("%s call %d (kind %d) answered: %s", c.name, id, kind, describeAnswer(a))
				}
				c.carry(c.d.Answer(*a))
				if a.Fetched.Records > 0 && c.state != consumerDown {
					c.schedulePoll() // records wait: the user's Poll wakes up
				}
			}
		})
	}
	lost := call{deadline: c.w.now + s.Timeout, timeout: func() { answer(&driver.Answered{Failure: transportFailure}) }}
	if s.Kind == driver.KindFetch {
		f := s.Fetch
		req := &fetchRequest{from: c.node, call: lost, token: s.Token, part: f.Partition, offset: f.Offset, maxWait: c.w.prof.client.fetchMaxWait,
			reply: func(r fetchResult) { answer(fetchAnswer(r)) }}
		gw := c.w.gateways[s.Gateway]
		c.w.net.request(c.node, gw.node, true, lost, func() { gw.receiveFetch(req) })
		return
	}
	req := &request{from: c.node, call: lost, token: s.Token, reply: func(r response) { answer(coordAnswer(r)) }}
	// Commits and leaves are retried, and so is a join under its key
	// (Idempotency-Key): a transport may repeat them, and the network
	// may stall one past the deadline, so it lands after its retry.
	dupable := true
	switch s.Kind {
	case driver.KindJoin:
		req.kind, req.join, req.joinKey, dupable = reqJoin, s.Join, s.JoinKey, s.JoinKey != ""
	case driver.KindHeartbeat:
		req.kind, req.wait, req.resync, dupable = reqHeartbeat, s.Wait, s.Resync, false
	case driver.KindCommit:
		req.kind, req.commit = reqCommit, s.Commit
	case driver.KindLeave:
		req.kind, req.commit = reqLeave, &api.CommitRequest{}
	}
	req.call.retried = dupable
	c.w.sendCoordinator(c.node, dupable, req)
}

// describeAnswer renders an answer for the trace.
func describeAnswer(a *driver.Answered) string {
	switch {
	case a.Failure != nil && a.Failure.Code == "":
		return "no answer"
	case a.Failure != nil:
		return string(a.Failure.Code)
	case a.Join.MemberID != "":
		return fmt.Sprintf("joined %s with %d grants", a.Join.MemberID, len(a.Join.Grants))
	case a.Fetched.Records > 0 || a.Fetched.Next > 0:
		return fmt.Sprintf("%d records, next %d", a.Fetched.Records, a.Fetched.Next)
	}
	return fmt.Sprintf("ok revoke=%v grants=%d renew=%d", a.News.Revoke, len(a.News.Grants), len(a.News.Renew))
}

var (
	errTransport     = errors.New("sim: no answer (connection refused, reset or timed out)")
	transportFailure = &driver.Failure{Err: errTransport, Earliest: -1, Latest: -1}
)

// coordAnswer is a coordinator answer as the SDK's transport reports it.
func coordAnswer(r response) *driver.Answered {
	switch {
	case r.transport:
		return &driver.Answered{Failure: transportFailure}
	case r.code != "":
		return &driver.Answered{Failure: refusal(r.code, -1, -1)}
	}
	return &driver.Answered{Join: r.join, News: r.news}
}

// fetchAnswer is a gateway answer as the SDK's transport reports it.
func fetchAnswer(r fetchResult) *driver.Answered {
	switch {
	case r.transport:
		return &driver.Answered{Failure: transportFailure}
	case r.code != "":
		return &driver.Answered{Failure: refusal(r.code, r.earliest, r.latest)}
	}
	return &driver.Answered{Fetched: driver.Fetched{Records: len(r.values), Bytes: int64(len(r.values)) * recordBytes, Next: r.next, Payload: r.values}}
}

func refusal(code api.Code, earliest, latest int64) *driver.Failure {
	return &driver.Failure{Code: code, Status: code.Status(), Err: errors.New(string(code)), Earliest: earliest, Latest: latest}
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

// schedulePoll makes the user poll after processing for a while.
func (c *consumer) schedulePoll() {
	if c.pollOn {
		return
	}
	c.pollOn = true
	c.later(c.w.between(0, c.w.prof.client.pollDelayMax), func() {
		c.pollOn = false
		c.carry(c.d.User(session.Polled{Now: c.w.wall()}))
	})
}

// timedCommits is the session's commit interval for seed (0: none).
func timedCommits(seed uint64, every time.Duration) time.Duration {
	if seed%3 == 1 {
		return every
	}
	return 0
}

// armCommit makes the user commit now and then: with Commit, or (half
// the seeds) with CommitAsync, whose requests merge while one is in
// flight (the commit lane, client/session/lane.go).
func (c *consumer) armCommit() {
	c.later(c.w.between(c.w.prof.client.commitEvery/2, c.w.prof.client.commitEvery*3/2), func() {
		if c.joined && c.d.Session().Status() == session.Active {
			c.ticket++
			async := c.w.seed/4%2 == 1 // independent of FullChecks (seed%4) and timed commits (seed%3)
			c.carry(c.d.User(session.CommitRequested{Now: c.w.wall(), Ticket: c.ticket, Async: async}))
		}
		c.armCommit()
	})
}

// stop ends a session that left: the process exits.
func (c *consumer) stop() {
	c.state = consumerDown
	c.inc++
	c.d = nil
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
	c.d = nil
	c.backlog = nil
}

// close asks the session to hand everything over and leave.
func (c *consumer) close() {
	if c.state != consumerRunning || !c.joined {
		return
	}
	c.carry(c.d.User(session.CloseRequested{Now: c.w.wall()}))
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
