package sim

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/session"
	"github.com/capgate/capgate/coordinator/driver"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/revocation"
	"github.com/capgate/capgate/store"
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
	reqGatewayLeave // sync credential: a gateway id leaves (POST /v1/sync/leave)
)

// request is one HTTP request to the coordinator; reply runs at the
// sender when the answer arrives (the sender drops answers it no longer
// waits for).
type request struct {
	kind      reqKind
	from      int
	call      call
	reply     func(response)
	join      *api.JoinRequest
	joinKey   string // reqJoin: driver.Send.JoinKey
	token     string // member token
	wait      time.Duration
	resync    bool // a heartbeat after a lost answer (driver.Step.Resync)
	commit    *api.CommitRequest
	partition session.Partition // of an admin revoke
	jti       string            // of an admin deny
	expires   time.Time
	gateway   int           // gateway index of a sync poll
	name      string        // its gateway id, when not gatewayID(gateway)
	inc       int           // the polling gateway's incarnation
	sent      time.Duration // when the poll was sent (true time)
	after     uint64
	hops      int // not_leader answers followed (replicas)
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

// coordinator is the coordinator process: the real shell decisions
// (coordinator/driver: gather, StepMany, audit, persist, send, Advance,
// fail closed; commit admission; grant rendering; the persist mapping
// and its inverse) over the real group.Machine, persisting to the real
// Kafka-log store running on its in-memory twin (store.MemLog), which
// survives crashes. What stays here is what the process does with
// goroutines and sockets: the batch window, the timer, HTTP, and the
// stand-ins for signing (tokens.go). It crashes before a persist (the
// store fails: the Ready is lost), between persist and send (its
// messages are lost), or at any quiet moment, and restarts by opening
// the log again (fence, read to the end) and restoring the machine.
type coordinator struct {
	w          *World
	idx        int // replica index (0: the only coordinator without replicas)
	node       int
	rep        *replica // nil without replicas
	cfg        group.Config
	bugs       driver.Bugs
	log        *store.MemLog // durable: survives every crash
	up         bool
	booted     bool // the misconfigured replica's late boot is scheduled (unfit.go)
	inc        int
	d          *driver.Driver
	pending    map[group.Ref]*request // waiting for the machine, for the checkers
	crashing   bool                   // a crash point hit during this flush: the process dies after it
	muted      bool                   // ... after the persist: none of the Ready's messages leaves
	lostAnswer bool                   // the persist committed but its answer was lost: none leaves, step down (replicas)
	flushOn    bool                   // a flush is scheduled
	tickGen    uint64                 // the armed tick's generation
	tickAt     time.Duration
	tickOn     bool
	readys     int
	// revocations is the shell's own revocation view (coordinator/denied.go):
	// filled from the store at start and from every persisted Ready.
	revocations *revocation.Set
	// topicNames is the machine's topic names, which a join's pattern is
	// matched against when the request arrives, as the coordinator's
	// handler does (coordinator/patterns.go): the machine brings the
	// match up to date with the topics changed before it steps the join.
	topicNames *group.TopicNames
	// livePatterns is the machine's live patterns, which the metadata
	// read matches new topics against before the loop takes them
	// (coordinator/metadata.go matchAdded).
	livePatterns *group.LivePatterns
}

// errCrash is the store failing because the process died under it.
var errCrash = errors.New("sim: coordinator crashed before the persist")

func newCoordinator(w *World, idx int, log *store.MemLog) *coordinator {
	cfg := w.prof.machine
	if w.opts.bugs.shortGatewayTimeout {
		// Planted bug: the coordinator calls a gateway silent before the
		// gateway's own sync_timeout has fenced it.
		cfg.GatewayTimeout = w.prof.gateway.syncTimeout / 2
		cfg.SyncWaitMax = min(cfg.SyncWaitMax, cfg.GatewayTimeout/2)
		cfg.MaxClockSkew = 0
	}
	if w.opts.bugs.serveCountedSilent {
		// Planted bug: gateways learn they may keep serving while cut
		// off, but the coordinator still counts their silence as safety.
		cfg.SilentGateways = group.SilentGatewaysFence
	}
	return &coordinator{w: w, idx: idx, node: w.replicaNode(idx), cfg: cfg, log: log,
		bugs: driver.Bugs{SendOnFailedPersist: w.opts.bugs.sendBeforePersist, DropOddOffsets: w.opts.bugs.storeLosesOffsets}}
}

// boot starts the coordinator for the first time.
func (c *coordinator) boot() { c.restart() }

func (c *coordinator) machineRNG() *rand.Rand {
	return rand.New(rand.NewPCG(c.w.rng.Uint64(), c.w.rng.Uint64()))
}

// restart opens the log as its only writer (fence, read to the end) and
// restores the machine from it, as the coordinator process does.
func (c *coordinator) restart() {
	if c.up {
		return
	}
	if c.rep != nil {
		c.follow()
		return
	}
	st, err := store.OpenMem(context.Background(), c.log, store.MemOptions{LogOptions: store.LogOptions{WriterID: "sim"}})
	if err != nil {
		c.w.fail("restore", "open the log: %v", err)
		return
	}
	c.up = true
	c.serve(st, nil)
}

// serve restores the machine from st (the log read to its end) and
// serves; snap, when not nil, is what to restore instead (a planted bug).
func (c *coordinator) serve(st *store.LogStore, snap *store.Snapshot) {
	var err error
	if snap == nil {
		snap, err = st.Load()
	}
	var restored driver.Restored
	if err == nil {
		restored, err = driver.Load(snap)
	}
	var m *group.Machine
	if err == nil {
		m, err = group.Restore(c.cfg, c.machineRNG(), restored.Snapshot, c.w.wall())
	}
	if err != nil {
		c.w.fail("restore", "%v", err)
		return
	}
	if c.inc > 0 {
		c.w.tracef("%s serves", c.w.nodeName(c.node))
	}
	c.inc++
	c.topicNames, c.livePatterns = m.TopicNames(), m.LivePatterns()
	c.d = driver.New(m, simStore{c: c, log: st}, simObserver{c}, restored)
	c.d.Plant(c.bugs)
	if n := c.w.prof.unownedRunMin; n > 0 {
		c.d.SetUnownedRunMin(n)
	}
	c.pending = map[group.Ref]*request{}
	c.revocations = revocation.New(revocation.Rule{Leeway: c.cfg.Leeway, MaxClockSkew: c.cfg.MaxClockSkew, Retain: c.cfg.RenewTokenGrace})
	for _, d := range snap.Denied {
		c.revocations.Deny(d.JTI, d.Exp)
	}
	for _, r := range snap.RevokedMembers {
		c.revocations.RevokeMember(revocation.MemberKey{Group: r.Group, Member: r.MemberID}, r.Until)
	}
	// Topic metadata is read at every start.
	topics := c.topics()
	c.d.Submit(func(group.Ref) group.Event { return topics }, nil)
	c.flush()
}

// settings are what gateways learn on a reset (as the coordinator's
// configuration says).
// With the planted shortGatewayTimeout the coordinator advertises the
// profile's timeouts while its machine uses shorter ones (else the
// gateways would refuse readiness, as they must).
func (c *coordinator) settings() *api.CoordinatorSettings {
	m := c.w.prof.machine
	return &api.CoordinatorSettings{Issuer: "sim", Audience: "sim",
		LeewayMs: m.Leeway.Milliseconds(), MaxLeaseMs: m.MaxLease.Milliseconds(),
		GatewayTimeoutMs: m.GatewayTimeout.Milliseconds(), MaxClockSkewMs: m.MaxClockSkew.Milliseconds(),
		SilentGateways: m.SilentGateways}
}

// topics is a read of the topic metadata from Kafka (a topic of no
// partitions is not created yet), with the live patterns' matches among
// the topics the machine's names do not hold yet, made here as
// coordinator/metadata.go's matchAdded makes them outside the loop: the
// loop takes them if its names are still the ones matched against, else
// matches in the loop (group.TopicHits); the sim counts each way.
func (c *coordinator) topics() group.Topics {
	topics := map[string]int32{}
	for i, t := range c.w.prof.topics {
		if n := c.w.prof.partitions[i]; n > 0 {
			topics[t] = n
		}
	}
	// Every tenant's texts in the first pass: the sim does not model the
	// deferred matcher (group.DeferredHits).
	hits := c.livePatterns.MatchAdded(c.topicNames, topics, c.cfg.Limits, func(string, int64) int { return group.FirstPassAll })
	if hits != nil && hits.Work > 0 {
		c.w.stats.TopicHits++
	}
	return group.Topics{Partitions: topics, Hits: hits}
}

// refreshTopics is the shell's metadata refresh after partitions or a
// topic were added: read, matched, then submitted to the loop.
func (c *coordinator) refreshTopics() {
	if !c.up || c.d == nil {
		return // the restart reads the metadata
	}
	topics := c.topics()
	c.d.Submit(func(group.Ref) group.Event { return topics }, nil)
	c.scheduleFlush()
}

// receive takes one request off the network: the handler's own checks,
// then the machine.
func (c *coordinator) receive(req *request) {
	if !c.up {
		c.respond(req, response{transport: true}) // connection refused
		return
	}
	if c.rep != nil && c.rep.paused {
		c.rep.backlog = append(c.rep.backlog, pending{req: req}) // read once it runs again
		return
	}
	// One delivery of req (a duplicate, or the same request redirected to
	// another replica, is another delivery): when it arrived and, with
	// replicas, the log's mark then.
	at := arrival{at: c.w.now}
	if c.rep != nil {
		var done bool
		if at.mark, done = c.routed(req); done {
			return
		}
	}
	build, code := c.event(req)
	if code != "" {
		c.respond(req, response{code: code})
		return
	}
	req.arrived = c.w.now
	c.d.Submit(func(ref group.Ref) group.Event {
		c.pending[ref] = req
		return build(ref)
	}, func(msg group.Message) { c.answer(req, at, msg) })
	c.scheduleFlush()
}

// scheduleFlush steps what was gathered once the batch window closes.
func (c *coordinator) scheduleFlush() {
	if c.flushOn {
		return
	}
	c.flushOn = true
	inc := c.inc
	c.w.after(c.w.prof.batchWindow, evCoordFlush, c.node, c.whenRunning(func() {
		if c.inc == inc && c.up {
			c.flushOn = false
			c.flush()
		}
	}))
}

// event turns a request into the machine's event, after the checks the
// shell does itself (member token, the capabilities of a commit or leave:
// driver.CommitOffsets).
func (c *coordinator) event(req *request) (func(group.Ref) group.Event, api.Code) {
	switch req.kind {
	case reqSync:
		if req.gateway == rogueGateway && c.w.healed {
			// The operator who removes the rogue's ids at the heal
			// (leaveOnBehalf) rotated the sync token first: a poll of
			// the rogue still on the wire then is refused, not taken as
			// a new registration after the leave — which held every
			// handoff of the drain under serve until the revoked
			// capabilities expired, past the drain's end (seed 7020 of
			// TestLaggingGatewaysHoldTheInvariants).
			return nil, api.CodeUnauthorized
		}
		return func(ref group.Ref) group.Event {
			return group.SyncPoll{Ref: ref, Gateway: req.gatewayName(), After: req.after, Wait: req.wait}
		}, ""
	case reqRevoke:
		return func(ref group.Ref) group.Event {
			return group.RevokePartition{Ref: ref, Group: groupName, Topic: req.partition.Topic, Partition: req.partition.Partition, Reason: "sim"}
		}, ""
	case reqDeny:
		return func(ref group.Ref) group.Event { return group.DenyJTI{Ref: ref, JTI: req.jti, Expires: req.expires} }, ""
	case reqRevokeMember:
		return func(ref group.Ref) group.Event {
			return group.RevokeMember{Ref: ref, Group: groupName, MemberID: req.member}
		}, ""
	case reqGatewayLeave:
		return func(ref group.Ref) group.Event { return group.GatewayLeave{Ref: ref, Gateway: req.gatewayName()} }, ""
	case reqJoin:
		j := *req.join
		renew := j.RenewToken != "" && !c.w.opts.bugs.renewFences
		if j.RenewToken != "" {
			if code := c.checkRenewToken(groupName, j); code != "" {
				return nil, code
			}
			c.w.stats.Renewals++
		}
		key := req.joinKey
		if c.w.opts.bugs.joinKeyIgnored {
			key = "" // planted bug: the handler drops the Idempotency-Key header
		}
		var matched *group.PatternMatch
		if j.TopicPattern != "" {
			matched, _ = c.topicNames.MatchTopics(j.TopicPattern, c.cfg.Limits) // an error: the machine refuses the join
		}
		return func(ref group.Ref) group.Event {
			return group.Join{Ref: ref, Group: groupName, MemberID: j.MemberID, InstanceID: j.InstanceID, ClientID: j.ClientID,
				Topics: j.Topics, TopicPattern: j.TopicPattern, SessionTimeout: time.Duration(j.SessionTimeoutMs) * time.Millisecond, Assignor: j.Assignor,
				Renew: renew, JoinKey: key, Matched: matched}
		}, ""
	}
	mc, ok := c.w.tokens.member(req.token)
	switch {
	case !ok:
		return nil, api.CodeUnauthorized
	case c.expired(mc):
		c.w.stats.ExpiredMemberTokens++
		return nil, api.CodeTokenExpired
	}
	member := mc.member
	req.member = member
	switch req.kind {
	case reqHeartbeat:
		if req.resync {
			c.w.stats.Resyncs++
		}
		return func(ref group.Ref) group.Event {
			return group.Heartbeat{Ref: ref, Group: groupName, MemberID: member, Wait: req.wait, Resync: req.resync}
		}, ""
	case reqCommit:
		offsets, refusal := driver.CommitOffsets(simVerifier{c}, groupName, member, req.commit.Offsets, req.commit.Release)
		if refusal != nil {
			return nil, refusal.Code
		}
		req.offsets = offsets
		return func(ref group.Ref) group.Event {
			return group.Commit{Ref: ref, Group: groupName, MemberID: member, Offsets: offsets, Release: req.commit.Release}
		}, ""
	}
	offsets, refusal := driver.CommitOffsets(simVerifier{c}, groupName, member, req.commit.Offsets, true)
	if refusal != nil {
		return nil, refusal.Code
	}
	return func(ref group.Ref) group.Event {
		return group.Leave{Ref: ref, Group: groupName, MemberID: member, Offsets: offsets}
	}, ""
}

// checkRenewToken is the shell's check of a renewal's renew_token
// (coordinator/join.go checkRenewToken): the member's own member token
// for member_id, unexpired — or expired less than groups.renew_token_grace
// ago (beyond the leeway) and not revoked as at the instant the grace
// reaches back to (renewTokenInGrace: the revocations keep their entries
// that much longer, revocation.Rule.Retain, in the machine and here).
// The machine refuses the rest (a member it no longer knows:
// unknown_member).
func (c *coordinator) checkRenewToken(groupName string, j api.JoinRequest) api.Code {
	mc, ok := c.w.tokens.member(j.RenewToken)
	switch {
	case !ok || j.MemberID == "":
		return api.CodeBadRequest
	case mc.member != j.MemberID:
		return api.CodeForbidden
	case !c.expired(mc):
		return ""
	case !c.withinGrace(mc):
		c.w.stats.RenewalsExpired++
		return api.CodeTokenExpired
	}
	if c.revocations.Check(&ocap.Claims{Subject: mc.member, Group: groupName}, c.w.wall().Add(-c.cfg.RenewTokenGrace)) != revocation.Allow {
		return api.CodeCapabilityRevoked
	}
	c.w.stats.RenewalsInGrace++
	return ""
}

// withinGrace: member token mc expired (expired), but less than
// groups.renew_token_grace past its exp plus the leeway
// (ocap.Verifier.VerifyExpiredWithin).
func (c *coordinator) withinGrace(mc memberClaims) bool {
	grace := c.cfg.RenewTokenGrace
	return grace > 0 && c.w.wall().Unix() < mc.exp.Unix()+int64((c.cfg.Leeway+grace)/time.Second)
}

// expired: member token mc expired (its exp plus the leeway passed), as
// the shell's verification decides.
func (c *coordinator) expired(mc memberClaims) bool {
	return !mc.exp.IsZero() && c.w.wall().Unix() >= mc.exp.Unix()+int64(c.cfg.Leeway/time.Second)
}

// simVerifier is the shell's capability check with the simulation's
// stand-in tokens: looked up instead of verified, expired after exp plus
// leeway, and checked against the shell's revocation view.
type simVerifier struct{ c *coordinator }

func (v simVerifier) Capability(token string) (*ocap.Claims, bool, error) {
	c := v.c
	claims := c.w.tokens.verify(token)
	now := c.w.wall()
	switch {
	case claims == nil:
		return nil, false, errUnknownToken
	case now.Unix() >= int64(claims.ExpiresAt)+int64(c.cfg.Leeway/time.Second):
		return nil, false, ocap.ErrExpired
	}
	return claims, c.revocations.Check(claims, now) != revocation.Allow, nil
}

var errUnknownToken = errors.New("sim: unknown token")

// flush runs the driver over what was gathered, then arms the timer.
func (c *coordinator) flush() {
	c.settle(c.d.Flush(c.w.wall()))
}

// settle handles the end of a driver step: a crash point hit during it
// crashes the process; a failure is a bug (the store only fails by
// crashing); then the machine checks itself and the timer is armed.
func (c *coordinator) settle(err error) {
	switch {
	case c.crashing:
		c.crashing, c.muted = false, false
		c.crash()
		return
	case c.lostAnswer:
		c.lostAnswer, c.muted = false, false
		c.writeFailed(errLostAnswer)
		return
	case errors.Is(err, group.ErrUnsafe):
		c.w.fail("machine invariants", "%v", err)
		return
	case err != nil && c.rep != nil:
		c.writeFailed(err) // fenced, or the log failed: step down
		return
	case err != nil:
		c.w.fail("coordinator", "failed closed: %v", err)
		return
	}
	c.d.Query(c.w.wall(), c.checkMachine)
	c.arm()
}

// simStore is the coordinator's store as the process sees it: the
// Kafka-log store on the in-memory log, and the crash points around each
// persist.
type simStore struct {
	c   *coordinator
	log *store.LogStore
}

func (s simStore) Update(fn func(w *store.Writer) error) error {
	c := s.c
	if c.crashPoint() {
		c.crashing = true // before the persist: the whole Ready is lost
		return errCrash
	}
	c.writeFault()
	if err := s.log.Update(fn); err != nil {
		c.lostAnswer, c.muted = false, false
		return err
	}
	if c.crashPoint() {
		c.crashing, c.muted = true, true // persisted but not sent
	}
	return nil
}

// simObserver feeds the checkers.
type simObserver struct{ c *coordinator }

// Persisted feeds the shell's revocation view, then tells the checkers
// what a Ready made durable, starting with the commits the machine
// accepted in it and the members a keyed join's repeat rejoined.
func (o simObserver) Persisted(rd group.Ready) {
	c := o.c
	for _, r := range rd.Persist {
		switch r := r.(type) {
		case group.DeniedRecord:
			c.revocations.Deny(r.Denied.JTI, r.Denied.Exp)
		case group.RevokedMemberRecord:
			c.revocations.RevokeMember(revocation.MemberKey{Group: r.RevokedMember.Group, Member: r.RevokedMember.MemberID}, r.RevokedMember.Until)
		}
	}
	for _, msg := range rd.Messages {
		req := c.pending[msg.Request()]
		if req == nil {
			continue
		}
		switch m := msg.(type) {
		case group.CommitReply:
			if c.w.check.landedRepeat(req.offsets) {
				c.w.stats.LandedRepeats++
			}
			c.w.check.commitAccepted(req.member, req.offsets, req.commit.Release)
		case group.JoinReply:
			if req.joinKey != "" {
				c.w.check.keyedJoin(req.joinKey, m.MemberID)
			}
			if !m.Created && req.join.MemberID == "" { // a keyed join's repeat
				c.w.stats.KeyedRepeats++
				if c.w.now > req.call.deadline {
					c.w.stats.LateRepeats++
				}
				c.w.check.rejoined(m.MemberID, m.Grants)
			}
		}
	}
	c.w.check.persisted(rd.Persist)
}

// Sending takes the gateways the machine found lagging (as the
// coordinator's observer does, to log them) and counts those the lag rule
// made safe.
func (o simObserver) Sending(_ time.Time, _ group.Ready, m *group.Machine) {
	notices, dropped := m.TakeLagging()
	for _, n := range notices {
		if n.Forgotten {
			o.c.w.stats.ForgottenForLag++
			continue
		}
		if n.SafeByLag {
			o.c.w.stats.SafeByLag++
		}
	}
	if dropped > 0 && o.c.w.prof.machine.SilentGateways != group.SilentGatewaysServe {
		o.c.w.stats.SafeByLag += dropped
	}
}

func (c *coordinator) crashPoint() bool {
	return !c.w.healed && c.w.chance(c.w.prof.readyCrash)
}

// invariantsEvery: the machine's O(state) self-check runs every this many
// flushes (its audit of every step refuses the Ready it breaks at once).
const invariantsEvery = 8

// checkMachine asks the machine to check its own invariants.
func (c *coordinator) checkMachine(m *group.Machine) {
	c.readys++
	if c.readys%invariantsEvery != 0 && !c.w.healed {
		return
	}
	if err := m.CheckInvariants(); err != nil {
		c.w.fail("machine invariants", "%v", err)
	}
}

// answer renders the machine's answer to req, as the handler does, and
// sends it back. A process dying after its persist sends nothing: the
// connection is reset.
func (c *coordinator) answer(req *request, at arrival, msg group.Message) {
	delete(c.pending, msg.Request())
	if c.muted {
		c.respond(req, response{transport: true})
		return
	}
	if c.rep != nil && !c.confirmed(at, msg) {
		c.notLeader(req, "") // deposed since the request arrived
		return
	}
	c.w.check.checkDeposedAnswer(c, req.kind, at, msg)
	c.respond(req, c.render(msg, req))
}

// render turns a machine message into the HTTP answer, minting grants as
// the handlers do (driver.RenderGrants).
func (c *coordinator) render(msg group.Message, req *request) response {
	switch m := msg.(type) {
	case driver.Unavailable:
		return response{transport: true} // the connection dies with the process
	case group.Rejected:
		return response{code: m.Code}
	case group.JoinReply:
		return response{join: api.JoinResponse{
			MemberID: m.MemberID, MemberToken: c.w.tokens.memberToken(m.MemberID, c.w.wall(), c.w.prof.memberTTL),
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
	case group.RevokeReply:
		c.w.check.revokeAnswered(m)
	case group.SyncReply:
		u := driver.SyncResponse(m, func() []api.JWK { return nil }, c.settings())
		if req.gateway != rogueGateway {
			c.w.check.syncSent(req.gateway, req.inc, req.sent, u)
		}
		return response{sync: u}
	}
	return response{}
}

// mint renders grants (driver.RenderGrants) with the simulation's token
// stand-in and start offsets resolved against its Kafka, and tells the
// checkers what left.
func (c *coordinator) mint(grants []group.Grant, resolve bool) []api.Grant {
	m := &simMinter{tokens: c.w.tokens}
	r, err := driver.RenderGrants(grants, resolve, c.w.wall(), time.Time{}, m, simResolver{c.w.kafka})
	if err != nil {
		panic("sim: render grants: " + err.Error())
	}
	for i, g := range r.Grants {
		claims := m.minted[i]
		c.w.check.minted(claims, c.w.kafka.resolve(g.Topic, g.Partition, g.Offset))
	}
	return r.Grants
}

// respond sends the answer of req back to its sender.
func (c *coordinator) respond(req *request, resp response) {
	if c.rep != nil {
		c.w.net.answer(c.node, req.from, req.call, func() { c.w.answered(req, c.idx, resp) })
		return
	}
	c.w.net.answer(c.node, req.from, req.call, func() { req.reply(resp) })
}

// arm schedules a Tick at the machine's next deadline.
func (c *coordinator) arm() {
	at, ok := c.d.NextDeadline()
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
	c.w.at(d, evCoordTick, c.node, c.whenRunning(func() {
		if c.inc != inc || !c.up || c.tickGen != gen {
			return
		}
		c.tickOn = false
		c.settle(c.d.Tick(c.w.wall()))
	}))
}

// crash kills the coordinator: the machine and everything in flight in
// it are gone; held requests see their connections reset.
func (c *coordinator) crash() {
	if !c.up {
		return
	}
	c.w.stats.CoordCrashes++
	c.w.tracef("%s crashed", c.w.nodeName(c.node))
	refs := make([]group.Ref, 0, len(c.pending))
	for ref := range c.pending {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	for _, ref := range refs {
		c.respond(c.pending[ref], response{transport: true})
	}
	c.up, c.d, c.pending = false, nil, nil
	c.inc++
	c.flushOn, c.tickOn = false, false
	c.forgetReplica()
	down := c.w.between(100*time.Millisecond, max(c.w.prof.coordDownMax, 100*time.Millisecond))
	c.w.after(down, evCoordRestart, c.node, c.restart)
}

// checkAnswered: the machine answers every request exactly once, a held
// one when its wait ends at the latest (group.Ref's contract). Admin
// revokes wait for the gateways, however long that takes; their answers
// are checked when they come (checkRevokeAnswered).
func (c *coordinator) checkAnswered() {
	if !c.up || c.d == nil || c.d.Stopped() {
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
