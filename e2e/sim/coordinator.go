package sim

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/session"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/revocation"
)

// groupName is the one consumer group of the simulation.
const groupName = "sim"

// reqKind is what a request to the coordinator asks for.
type reqKind uint8

const (
	reqJoin reqKind = iota
	reqHeartbeat
	reqCommit
	reqLeave
	reqSync
	reqRevoke       // admin: revoke a partition
	reqDeny         // admin: deny a capability id
	reqRevokeMember // admin: revoke a member
)

// request is one HTTP request to the coordinator; reply runs at the
// sender when the answer arrives (the sender drops answers it no longer
// waits for).
type request struct {
	kind      reqKind
	from      int
	call      call
	reply     func(response)
	join      api.JoinRequest
	token     string // member token
	wait      time.Duration
	commit    api.CommitRequest
	partition session.Partition // of an admin revoke
	jti       string            // of an admin deny
	expires   time.Time
	gateway   int           // gateway index of a sync poll
	inc       int           // the polling gateway's incarnation
	sent      time.Duration // when the poll was sent (true time)
	after     uint64
	// Filled by the coordinator for the checkers.
	arrived time.Duration
	member  string
	offsets []group.CommitOffset
}

// response is the coordinator's answer: transport means no HTTP answer
// at all (connection refused or reset); code is an error answer.
type response struct {
	transport bool
	code      api.Code
	join      api.JoinResponse
	news      api.HeartbeatResponse
	commit    api.CommitResponse
	sync      api.SyncResponse
}

// coordinator is the coordinator process: the real group.Machine behind a
// model of the shell's event loop (coordinator/loop.go). Requests that
// arrive within the batch window are stepped together (StepMany); each
// Ready is persisted to the durable store BEFORE any of its messages is
// sent, then Advance. It can crash before the persist (the Ready is lost),
// between persist and send (the messages are lost), or at any quiet
// moment, and restarts with group.Restore from the store.
type coordinator struct {
	w        *World
	cfg      group.Config
	up       bool
	inc      int
	m        *group.Machine
	store    *store
	nextRef  group.Ref
	pending  map[group.Ref]*request
	batch    []group.Event
	flushOn  bool   // a flush is scheduled
	tickGen  uint64 // the armed tick's generation
	tickAt   time.Duration
	tickOn   bool
	readys   int
	observed bool // the current Ready's accepted commits were observed
	// revocations is the shell's own revocation view (coordinator/denied.go):
	// filled from the store at start and from every persisted Ready.
	revocations *revocation.Set
}

func newCoordinator(w *World) *coordinator {
	cfg := w.prof.machine
	if w.opts.bugs.shortGatewayTimeout {
		// Planted bug: the coordinator calls a gateway silent before the
		// gateway's own sync_timeout has fenced it.
		cfg.GatewayTimeout = w.prof.gateway.syncTimeout / 2
		cfg.SyncWaitMax = min(cfg.SyncWaitMax, cfg.GatewayTimeout/2)
		cfg.MaxClockSkew = 0
	}
	st := newStore()
	st.losesOffsets = w.opts.bugs.storeLosesOffsets
	return &coordinator{w: w, cfg: cfg, store: st}
}

// boot starts the coordinator for the first time.
func (c *coordinator) boot() {
	m, err := group.New(c.cfg, c.machineRNG())
	if err != nil {
		panic("sim: " + err.Error())
	}
	c.start(m)
}

func (c *coordinator) machineRNG() *rand.Rand {
	return rand.New(rand.NewPCG(c.w.rng.Uint64(), c.w.rng.Uint64()))
}

// start runs a fresh or restored machine: topic metadata is read at every
// start, as the shell does.
func (c *coordinator) start(m *group.Machine) {
	c.up, c.m = true, m
	c.inc++
	c.pending = map[group.Ref]*request{}
	c.revocations = revocation.New(revocation.Rule{Leeway: c.cfg.Leeway, MaxClockSkew: c.cfg.MaxClockSkew})
	for jti, d := range c.store.denied {
		c.revocations.Deny(jti, d.Exp)
	}
	for _, r := range c.store.revoked {
		c.revocations.RevokeMember(revocation.MemberKey{Group: r.Group, Member: r.MemberID}, r.Until)
	}
	c.m.Step(c.w.wall(), c.topics())
	c.drain()
	if c.up {
		c.arm()
	}
}

// topics is the topic metadata the shell reads from Kafka.
func (c *coordinator) topics() group.Topics {
	topics := map[string]int32{}
	for i, t := range c.w.prof.topics {
		topics[t] = c.w.prof.partitions[i]
	}
	return group.Topics{Partitions: topics}
}

// refreshTopics is the shell's metadata refresh after partitions were
// added.
func (c *coordinator) refreshTopics() {
	if !c.up {
		return // the restart reads the metadata
	}
	c.gather(c.topics())
}

// receive takes one request off the network.
func (c *coordinator) receive(req *request) {
	if !c.up {
		c.respond(req, response{transport: true}) // connection refused
		return
	}
	c.nextRef++
	ref := c.nextRef
	ev, code := c.event(ref, req)
	if code != "" {
		c.respond(req, response{code: code})
		return
	}
	req.arrived = c.w.now
	c.pending[ref] = req
	c.gather(ev)
}

// gather queues an event for the next flush.
func (c *coordinator) gather(ev group.Event) {
	c.batch = append(c.batch, ev)
	if !c.flushOn {
		c.flushOn = true
		inc := c.inc
		c.w.after(c.w.prof.batchWindow, evCoordFlush, coordNode, func() {
			if c.inc == inc && c.up {
				c.flush()
			}
		})
	}
}

// event turns a request into the machine's event, after the checks the
// shell does itself (member token, capabilities of commits).
func (c *coordinator) event(ref group.Ref, req *request) (group.Event, api.Code) {
	if req.kind == reqSync {
		return group.SyncPoll{Ref: ref, Gateway: gatewayID(req.gateway), After: req.after, Wait: req.wait}, ""
	}
	switch req.kind {
	case reqRevoke:
		return group.RevokePartition{Ref: ref, Group: groupName, Topic: req.partition.Topic, Partition: req.partition.Partition, Reason: "sim"}, ""
	case reqDeny:
		return group.DenyJTI{Ref: ref, JTI: req.jti, Expires: req.expires}, ""
	case reqRevokeMember:
		return group.RevokeMember{Ref: ref, Group: groupName, MemberID: req.member}, ""
	}
	if req.kind == reqJoin {
		j := req.join
		return group.Join{Ref: ref, Group: groupName, MemberID: j.MemberID, InstanceID: j.InstanceID, ClientID: j.ClientID,
			Topics: j.Topics, TopicPattern: j.TopicPattern, SessionTimeout: time.Duration(j.SessionTimeoutMs) * time.Millisecond, Assignor: j.Assignor}, ""
	}
	member, ok := memberOf(req.token)
	if !ok {
		return nil, api.CodeUnauthorized
	}
	req.member = member
	switch req.kind {
	case reqHeartbeat:
		return group.Heartbeat{Ref: ref, Group: groupName, MemberID: member, Wait: req.wait}, ""
	case reqCommit:
		offsets, code := c.verifyOffsets(member, req.commit.Offsets, req.commit.Release)
		req.offsets = offsets
		return group.Commit{Ref: ref, Group: groupName, MemberID: member, Offsets: offsets, Release: req.commit.Release}, code
	default:
		return group.Leave{Ref: ref, Group: groupName, MemberID: member}, ""
	}
}

// verifyOffsets checks each offset's capability as coordinator/commit.go
// does and returns the offsets with the capabilities' epochs.
func (c *coordinator) verifyOffsets(member string, offsets []api.CommitOffset, release bool) ([]group.CommitOffset, api.Code) {
	out := make([]group.CommitOffset, 0, len(offsets))
	now := c.w.wall().Unix()
	leeway := int64(c.cfg.Leeway / time.Second)
	for _, o := range offsets {
		claims := c.w.tokens.verify(o.Capability)
		switch {
		case o.Offset < 0 && !release:
			return nil, api.CodeBadRequest
		case claims == nil:
			return nil, api.CodeUnauthorized
		case now >= int64(claims.ExpiresAt)+leeway:
			return nil, api.CodeTokenExpired
		case c.revocations.Check(claims, c.w.wall()) != revocation.Allow && !release:
			return nil, api.CodeCapabilityRevoked // coordinator/commit.go: a denied capability may only release
		case claims.Group != groupName || claims.Epoch == 0 || claims.Subject != member ||
			claims.Topic != o.Topic || claims.PartitionNumber() != o.Partition:
			return nil, api.CodeForbidden
		}
		out = append(out, group.CommitOffset{Topic: o.Topic, Partition: o.Partition, Epoch: claims.Epoch, Offset: o.Offset, Metadata: o.Metadata})
	}
	return out, ""
}

// flush steps the gathered requests in one StepMany and handles the Ready.
func (c *coordinator) flush() {
	c.flushOn = false
	if len(c.batch) > 0 {
		events := c.batch
		c.batch = nil
		c.m.StepMany(c.w.wall(), events)
	}
	c.drain()
	if c.up {
		c.arm()
	}
}

// drain handles the machine's Ready: persist, then send, then Advance,
// crashing in between now and then.
func (c *coordinator) drain() {
	if !c.m.HasReady() {
		c.checkMachine()
		return
	}
	rd, err := c.m.Ready()
	if err != nil {
		c.w.fail("machine invariants", "%v", err)
		return
	}
	c.observed = false
	if c.crashPoint() {
		c.crash() // before the persist: the whole Ready is lost
		return
	}
	first, second := c.persist, c.sendAll
	if c.w.opts.bugs.sendBeforePersist {
		first, second = c.sendAll, c.persist // planted bug
	}
	first(rd)
	if c.crashPoint() {
		c.crash() // persisted but not sent (or, with the bug, sent but not persisted)
		return
	}
	second(rd)
	c.m.Advance()
	c.checkMachine()
}

func (c *coordinator) crashPoint() bool {
	return !c.w.healed && c.w.chance(c.w.prof.readyCrash)
}

// persist writes a Ready to the store and tells the checkers what it
// made durable.
func (c *coordinator) persist(rd group.Ready) {
	c.store.apply(rd.Persist)
	for _, r := range rd.Persist {
		switch r := r.(type) {
		case group.DeniedRecord:
			c.revocations.Deny(r.Denied.JTI, r.Denied.Exp)
		case group.RevokedMemberRecord:
			c.revocations.RevokeMember(revocation.MemberKey{Group: r.RevokedMember.Group, Member: r.RevokedMember.MemberID}, r.RevokedMember.Until)
		}
	}
	c.observeAccepted(rd)
	c.w.check.persisted(rd.Persist)
}

// observeAccepted tells the checkers, once per Ready and before anything
// else of it, which commits the machine accepted in it.
func (c *coordinator) observeAccepted(rd group.Ready) {
	if c.observed {
		return
	}
	c.observed = true
	for _, msg := range rd.Messages {
		if _, ok := msg.(group.CommitReply); ok {
			if req := c.pending[msg.Request()]; req != nil {
				c.w.check.commitAccepted(req.member, req.offsets, req.commit.Release)
			}
		}
	}
}

// sendAll sends a Ready's messages, each to the request it answers.
func (c *coordinator) sendAll(rd group.Ready) {
	c.observeAccepted(rd)
	for _, msg := range rd.Messages {
		req := c.pending[msg.Request()]
		if req == nil {
			continue
		}
		delete(c.pending, msg.Request())
		c.respond(req, c.render(msg, req))
	}
}

// invariantsEvery: the machine's O(state) self-check runs every this many
// Readys (its audit of epochs, grants and persists is kept on every step
// and reported by the next check).
const invariantsEvery = 8

// checkMachine asks the machine to check its own invariants.
func (c *coordinator) checkMachine() {
	c.readys++
	if c.readys%invariantsEvery != 0 && !c.w.healed {
		return
	}
	if err := c.m.CheckInvariants(); err != nil {
		c.w.fail("machine invariants", "%v", err)
	}
}

// render turns a machine message into the HTTP answer, minting grants as
// the shell does (coordinator/grants.go).
func (c *coordinator) render(msg group.Message, req *request) response {
	switch m := msg.(type) {
	case group.Rejected:
		return response{code: m.Code}
	case group.JoinReply:
		return response{join: api.JoinResponse{
			MemberID: m.MemberID, MemberToken: memberToken(m.MemberID),
			SessionTimeoutMs: m.SessionTimeout.Milliseconds(), HeartbeatWaitMs: m.HeartbeatWait.Milliseconds(),
			Grants: c.mint(m.Grants, true),
		}}
	case group.News:
		revoke := m.Revoke
		if revoke == nil {
			revoke = []api.PartitionRef{}
		}
		return response{news: api.HeartbeatResponse{Revoke: revoke, Grants: c.mint(m.Grants, true), Renew: c.mint(m.Renew, false)}}
	case group.CommitReply:
		return response{commit: api.CommitResponse{Committed: m.Committed}}
	case group.LeaveReply:
		return response{}
	case group.RevokeReply:
		c.w.check.revokeAnswered(m)
		return response{}
	case group.Done:
		return response{}
	case group.RevokeMemberReply:
		return response{}
	case group.SyncReply:
		u := api.SyncResponse{Seq: m.Seq, Reset: m.Reset, Fences: m.Fences, Denied: m.Denied, RevokedMembers: m.RevokedMembers, QoS: m.QoS}
		if m.Reset {
			u.Revocation = m.Rule.Wire()
		}
		c.w.check.syncSent(req.gateway, req.inc, req.sent, u)
		return response{sync: u}
	}
	panic("sim: coordinator: unexpected message " + msgName(msg))
}

func msgName(msg group.Message) string {
	switch msg.(type) {
	case group.LeaseReply:
		return "LeaseReply"
	}
	return "other"
}

// mint mints grants: resolve turns the earliest/latest sentinels into
// offsets (grants, not renewals, as coordinator/heartbeat.go does); a
// grant expiring within a second is dropped.
func (c *coordinator) mint(grants []group.Grant, resolve bool) []api.Grant {
	out := make([]api.Grant, 0, len(grants))
	now := c.w.wall()
	for _, g := range grants {
		if g.ExpiresAt.Unix()-now.Unix() < 1 {
			continue
		}
		part := c.w.kafka.index[partitionOf(g.Topic, g.Partition)]
		resolved := g.Offset
		switch g.Offset {
		case group.OffsetEarliest:
			resolved = 0
		case group.OffsetLatest:
			resolved = c.w.kafka.end(part)
		}
		offset := g.Offset
		if resolve {
			offset = resolved
		}
		token, claims := c.w.tokens.mint(g, now)
		c.w.check.minted(g, claims, resolved)
		out = append(out, api.Grant{Topic: g.Topic, Partition: g.Partition, Epoch: g.Epoch, Offset: offset,
			Capability: token, ExpiresAt: time.Unix(int64(claims.ExpiresAt), 0).UTC().Format(time.RFC3339)})
	}
	return out
}

// respond sends the answer of req back to its sender.
func (c *coordinator) respond(req *request, resp response) {
	c.w.net.answer(coordNode, req.from, req.call, func() { req.reply(resp) })
}

// arm schedules a Tick at the machine's next deadline.
func (c *coordinator) arm() {
	at, ok := c.m.NextDeadline()
	if !ok {
		return
	}
	d := at.Sub(base)
	if c.tickOn && c.tickAt <= d {
		return
	}
	c.tickGen++
	gen, inc := c.tickGen, c.inc
	c.tickOn, c.tickAt = true, d
	c.w.at(d, evCoordTick, coordNode, func() {
		if c.inc != inc || !c.up || c.tickGen != gen {
			return
		}
		c.tickOn = false
		c.m.Tick(c.w.wall())
		c.drain()
		if c.up {
			c.arm()
		}
	})
}

// crash kills the coordinator: the machine and everything in flight in
// it are gone; held requests see their connections reset.
func (c *coordinator) crash() {
	if !c.up {
		return
	}
	c.w.stats.CoordCrashes++
	c.w.tracef("coordinator crashed")
	refs := make([]group.Ref, 0, len(c.pending))
	for ref := range c.pending {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	for _, ref := range refs {
		c.respond(c.pending[ref], response{transport: true})
	}
	c.up, c.m, c.pending, c.batch = false, nil, nil, nil
	c.inc++
	c.flushOn, c.tickOn = false, false
	down := c.w.between(100*time.Millisecond, max(c.w.prof.coordDownMax, 100*time.Millisecond))
	c.w.after(down, evCoordRestart, coordNode, c.restart)
}

// checkAnswered: the machine answers every request exactly once, a held
// one when its wait ends at the latest (group.Ref's contract). Admin
// revokes wait for the gateways, however long that takes; their answers
// are checked when they come (checkRevokeAnswered).
func (c *coordinator) checkAnswered() {
	if !c.up {
		return
	}
	bound := max(c.cfg.HeartbeatWait, c.cfg.SyncWaitMax) + c.w.prof.batchWindow + time.Second
	refs := make([]group.Ref, 0, len(c.pending))
	for ref := range c.pending {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	for _, ref := range refs {
		if req := c.pending[ref]; req.kind != reqRevoke && c.w.now-req.arrived > bound {
			c.w.fail("one reply per request", "request %d (kind %d) from node %d unanswered since %s", ref, req.kind, req.from, req.arrived)
			return
		}
	}
}

// restart rebuilds the machine from the durable store.
func (c *coordinator) restart() {
	if c.up {
		return
	}
	m, err := group.Restore(c.cfg, c.machineRNG(), c.store.snapshot(), c.w.wall())
	if err != nil {
		c.w.fail("restore", "%v", err)
		return
	}
	c.w.tracef("coordinator restarted")
	c.start(m)
}
