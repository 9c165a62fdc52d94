package driver

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/session"
)

// Config is what the driver decides with. Every duration is the
// consumer's setting of the same name (client.Config).
type Config struct {
	// Join is the body of every join; MemberID stays empty (a rejoin is a
	// new member with the same instance id).
	Join api.JoinRequest
	// Gateways is how many gateways a fetch may go to (indexes 0..n-1).
	Gateways       int
	HeartbeatWait  time.Duration
	FetchMaxWait   time.Duration
	RequestTimeout time.Duration
	// JoinTimeout bounds the first join, its retries included; each
	// attempt is bounded by RequestTimeout. Zero, or less than
	// RequestTimeout: RequestTimeout (the Kafka listener and the
	// simulation leave it so). A consumer given a longer one keeps
	// retrying a first join that failed retriably — no answer, a
	// coordinator that is not running, 421 with no leader known, 503,
	// 429 — as a failover does to a join in flight, with the same
	// Idempotency-Key (Send.JoinKey): an attempt the failing leader
	// wrote but never answered made a member, and the retry is answered
	// that member instead of leaving it behind. A refusal that is not
	// retriable (400, 401, 403, 404, 409) still ends it at once.
	JoinTimeout time.Duration
	// Replicas: the coordinator is several replicas (more than one URL);
	// a heartbeat one holds without answering well past its wait is
	// given up early (heartbeatMargin) and the next is asked; a commit
	// attempt silent as long is left running and another sent (hedge).
	Replicas        bool
	RetryBackoff    time.Duration
	RetryBackoffMax time.Duration
	Session         session.Config
	// MemberRenew: this long before the member token expires (never later
	// than the credential the member joined with) the member is renewed —
	// at most half the token's life left at the join, so a short token is
	// renewed in time too. First the member is carried over: one rejoin
	// by its member id with the shell's current credential and its member
	// token (renew_token), which the coordinator takes when that
	// credential is the member's identity still (the same credential, or
	// a refreshed IdP token of the same subject); the member keeps its id,
	// partitions and epochs, so the group does not reassign around it. When the coordinator refuses it (another
	// credential: unknown_member), or the new token would not outlive the
	// old, or it failed retriably until request_timeout (no answer, 5xx,
	// 429, the credential source failing: tried again), the member is renewed
	// as a new one (session.RenewRequested: every partition revoked and
	// released, a leave, a join). 0: never; the token then runs out and
	// the heartbeat's token_expired rejoins (partitions lost, not
	// released).
	MemberRenew time.Duration
	// Rand draws backoff jitter: uniform in [0, n).
	Rand func(n int64) int64
	// Bugs plants known bugs (tests only; zero: none).
	Bugs Bugs
}

// Bugs plants known bugs in the driver, for the tests that prove the
// simulation's checkers catch them. The zero value plants none.
type Bugs struct {
	// DeliverAfterRevoke hands the records of a cancelled fetch's late
	// answer to the user.
	DeliverAfterRevoke bool
	// CommitAhead commits one record past each processed offset.
	CommitAhead bool
}

// Kind is what a request is.
type Kind uint8

// The requests.
const (
	KindJoin Kind = iota + 1
	KindHeartbeat
	KindFetch
	KindCommit
	KindLeave
)

// Command is one thing for the shell to carry out, in order: Send,
// Cancel, JoinRetrying, JoinResult, LeaveResult, Failed, or the session's Deliver,
// CallRevoke, CallGrant, CommitResult, CommitMerged and Stop.
type Command any

// Send is one attempt of a request. Token is the bearer (a member token
// or, for a fetch, the capability; empty for a join: the shell's
// credential). Step Answered{Call} with its outcome; Timeout bounds it.
// The pointed-to bodies are the driver's: read them, do not keep or
// change them.
type Send struct {
	Call  uint64
	Kind  Kind
	Token string
	Join  *api.JoinRequest // KindJoin
	// JoinKey (KindJoin): the join's key, the same on each of its
	// attempts (header Idempotency-Key), "" for a renewal's carry-over
	// (it names its member). A coordinator answers a repeat with the
	// member an earlier attempt made: an attempt given up on a leader
	// that was only slow made a member anyway.
	JoinKey string
	Wait    time.Duration      // KindHeartbeat: wait_ms
	Resync  bool               // KindHeartbeat: resync (an earlier answer was lost)
	Commit  *api.CommitRequest // KindCommit
	Fetch   *session.Fetch     // KindFetch
	Gateway int                // KindFetch: the gateway index
	Timeout time.Duration
	// Hedge (KindCommit, with replicas): an earlier attempt of this
	// commit has been silent past the margin and is left running — the
	// replica holding it may be frozen, or alive and writing it to a
	// slow log. Send this one to another replica (move off the one in
	// use, as after a failed attempt); whichever answers first decides.
	Hedge bool
}

// Cancel aborts attempt Call if it still runs; its answer is ignored.
type Cancel struct{ Call uint64 }

// JoinResult ends the first join: Err nil means joined.
type JoinResult struct {
	Err      error
	Response api.JoinResponse
}

// JoinRetrying: the first join failed retriably and is retried until
// Until (join_timeout after Start); reported once, at its first failure,
// so a caller waiting on a coordinator that is down or electing a
// leader hears why at once rather than at join_timeout. JoinResult
// still ends the join.
type JoinRetrying struct {
	Err   error
	Until time.Time
}

// LeaveResult is the leave's outcome (nil: left, or already gone).
type LeaveResult struct{ Err error }

// Failed: the consumer cannot go on (a rejoin was refused for good).
type Failed struct{ Err error }

// Aborted: the consumer cannot go on (a gateway does not know the route,
// topic or partition: a wrong URL or subscription; a TLS handshake
// refused). Report Err to the user from now on; the session is closing —
// it releases what it holds (commit, release, leave) so other members can
// read — and its Stop follows.
type Aborted struct{ Err error }

// MemberRemoved: the coordinator answered a heartbeat or a commit of the
// current, active member with unknown_member — it removed the member.
// Reported once, by whichever answer comes first. Unheard: the heartbeat
// had already failed without an answer, so the member's
// session most likely expired while the coordinator did not hear it;
// otherwise an administrator revoked it (admin revoke-member, group
// delete --force). An answer that says the member was revoked
// (api.DetailRemoved) is never Unheard: a heartbeat attempt that had
// failed on a loaded machine made an administrator's revoke read as an
// expiry. The session loses its partitions and joins again, as
// Kafka's consumers do after RemoveMembersFromConsumerGroup; the shell
// tells the user, who stops a consumer by denying its credential.
// Removed is the answer's api.DetailRemoved, when it said why:
// api.RemovedRevoked, or api.RemovedPatternUnrestored (a restart restored
// the member without its topic_pattern's topics).
type MemberRemoved struct {
	Member  string
	Unheard bool
	Removed string
	Err     error
}

// Answered is the outcome of attempt Call: Failure nil on success, with
// the answer in the field of its kind.
type Answered struct {
	Now     time.Time
	Call    uint64
	Failure *Failure
	Join    api.JoinResponse
	News    api.HeartbeatResponse
	Fetched Fetched
}

// Fetched is a fetch's decoded answer.
type Fetched struct {
	Records int
	Bytes   int64
	Next    int64
	Payload any // the decoded records, opaque to the driver
}

// Failure is a failed attempt: a refusal with Code (and Status), or no
// answer at all (Code "": connection refused or reset, timeout, an answer
// that did not decode). Err is the shell's error, handed back to the user.
type Failure struct {
	Code             api.Code
	Status           int
	RetryAfter       time.Duration
	Earliest, Latest int64 // offset_out_of_range bounds, -1 when unknown
	// Final: no answer, and no retry can mend it (the server's TLS
	// certificate was refused, or it refused ours): fail fast.
	Final bool
	// Removed is an unknown_member answer's api.DetailRemoved: why the
	// coordinator removed the member, "" when it did not say.
	Removed string
	Err     error
}

// retriable: no answer, or a refusal a later try may not meet.
func (f *Failure) retriable() bool {
	return !f.Final && (f.Code == "" || api.IsRetriable(f.Code))
}

// Retriable reports whether a later attempt may not meet f: no answer,
// or a refusal such as unavailable or rate_limited (a shell retrying a
// request of its own: the Kafka listener's carry-over).
func (f *Failure) Retriable() bool { return f.retriable() }

// failover: another gateway may do better (unreachable or failing).
func (f *Failure) failover() bool { return !f.Final && (f.Code == "" || f.Status >= 500) }

// fatal: the consumer cannot go on with this failure (a fetch's 404 — a
// wrong gateway URL, topic or partition — or a refused TLS handshake).
func (f *Failure) fatal() bool { return f.Final || f.Code == api.CodeNotFound }

func (f *Failure) code() api.Code {
	if f.Code == "" {
		return api.CodeUnavailable
	}
	return f.Code
}

// errDeadline ends a join, commit or leave whose request_timeout passed
// with no answer at all. It says Timeout() as net.Error and
// os.ErrDeadlineExceeded do, so a caller tells it from a refusal without
// reading its text (capgate consume then asks whether the URL is a Kafka
// port that takes the request and never answers).
var errDeadline error = deadlineError{}

type deadlineError struct{}

func (deadlineError) Error() string { return "client: request_timeout passed without an answer" }
func (deadlineError) Timeout() bool { return true }

// op is one request across its attempts.
type op struct {
	kind     Kind
	call     uint64    // the attempt in flight (0: none)
	round    int       // backoffs so far
	attempts int       // fetch attempts, for failover
	deadline time.Time // zero: retried without end
	retryAt  time.Time // zero: not waiting to retry
	last     *Failure
	done     bool

	initial   bool             // KindJoin: the first join (bounded by joinTimeout)
	key       string           // KindJoin: the join's key (Send.JoinKey; not a carry-over's)
	carry     *api.JoinRequest // KindJoin: a renewal's rejoin by member id (carryOver)
	renew     bool             // KindLeave: ends a renewal, not the consumer
	fetch     session.Fetch    // KindFetch
	gateway   int              // KindFetch: where the attempt went
	cancelled bool             // KindFetch: the session cancelled it
	commit    session.Commit   // KindCommit
	token     string           // KindLeave, KindHeartbeat
	member    uint64           // KindHeartbeat, KindJoin carry: the incarnation it was sent for
	resync    bool             // KindHeartbeat: the attempt in flight said resync

	// KindCommit with replicas (hedge): hedgeAt is when the attempt in
	// flight is left running and another sent (zero: none due); hedged
	// are the earlier attempts still in flight (at most hedgedMax);
	// refused is a refusal one of them got while another was in flight.
	hedgeAt time.Time
	hedged  []uint64
	hedging bool
	refused *Failure
}

// hedgedMax bounds the earlier attempts of one commit left in flight:
// past it no more hedges go out, and the attempts in flight are waited
// for until request_timeout. Never the oldest given up for a new one:
// at a leader writing to a slow log the oldest is the likeliest to be
// answered first (its write may have begun behind another: two writes).
const hedgedMax = 2

// inFlight: an attempt of o is in flight.
func (o *op) inFlight() bool { return o.call != 0 || len(o.hedged) > 0 }

// Driver is one consumer's shell logic.
type Driver struct {
	cfg      Config
	s        *session.Session
	now      time.Time
	nextCall uint64
	calls    map[uint64]*op // attempts in flight
	ops      []*op          // live ops, in creation order (timers)
	fetches  map[uint64]*op // by session fetch id
	join     *op
	beat     *op
	gateway  int // the gateway every fetch starts at
	joined   bool
	renewAt  time.Time // when to renew the member (zero: never)
	// session is the session timeout the coordinator answered the last
	// join with (zero before: Config.Join's), heartbeatWait the
	// heartbeat_wait it answered (zero before: Config.HeartbeatWait's);
	// heartbeatMargin.
	session       time.Duration
	heartbeatWait time.Duration
	stopped       bool
	aborted       bool
	pending       []session.Event // for the session, after the current actions
	out           []Command

	// resync: a heartbeat's answer did not arrive (no answer, a 5xx), so
	// the coordinator may count its news as delivered; the next heartbeat
	// asks for everything again (api.HeartbeatRequest.Resync) until one
	// so asking is answered.
	resync bool
}

// New returns a driver with an Idle session; Start joins.
func New(cfg Config) *Driver {
	return &Driver{
		cfg: cfg, s: session.New(cfg.Session),
		calls: map[uint64]*op{}, fetches: map[uint64]*op{},
	}
}

// Session is the consumer core, for read-only calls (Status, Member,
// Assigned).
func (d *Driver) Session() *session.Session { return d.s }

// Start sends the first join; JoinResult reports how it ended (after
// joinTimeout at the latest).
func (d *Driver) Start(now time.Time) []Command {
	d.now = now
	if d.joined || d.join != nil || d.stopped {
		return nil
	}
	d.join = d.newOp(&op{kind: KindJoin, initial: true, key: d.joinKey(), deadline: now.Add(d.joinTimeout())})
	d.send(d.join)
	return d.flush()
}

// joinTimeout bounds the first join (Config.JoinTimeout): at least
// request_timeout.
func (d *Driver) joinTimeout() time.Duration { return max(d.cfg.JoinTimeout, d.cfg.RequestTimeout) }

// User steps an event of the user or the clock into the session:
// session.Polled, CommitRequested, HookDone, CloseRequested.
func (d *Driver) User(ev session.Event) []Command {
	d.pending = append(d.pending, ev)
	return d.flush()
}

// Tick fires what is due at now: retries after their backoff, requests
// whose request_timeout passed, the session's own deadline.
func (d *Driver) Tick(now time.Time) []Command {
	d.now = now
	for _, o := range d.ops { // expire and send never add ops
		switch {
		case o.done:
		case !o.deadline.IsZero() && !now.Before(o.deadline):
			d.expire(o)
		case !o.hedgeAt.IsZero() && !now.Before(o.hedgeAt) && o.call != 0:
			d.hedge(o)
		case !o.retryAt.IsZero() && !now.Before(o.retryAt):
			o.retryAt = time.Time{}
			d.send(o)
		}
	}
	if at := d.s.NextDeadline(); !at.IsZero() && !now.Before(at) {
		d.pending = append(d.pending, session.Tick{Now: now})
	}
	if !d.renewAt.IsZero() && !now.Before(d.renewAt) {
		d.renewAt = time.Time{}
		d.carryOver()
	}
	return d.flush()
}

// carryOver starts a renewal (MemberRenew): one rejoin of the active
// member by its member id with the shell's current credential and its
// member token as renew_token, answered in carryAnswered. The
// coordinator renews the member in place: no fence, same epochs, so
// nothing is read twice (a plain rejoin fences, and the regrant at the
// last commit re-delivered what was read since). Only when that cannot
// renew it does the member leave and join anew (renewAnew), where every
// renewal made the member's partitions move twice (to the others at the
// leave, back at the join).
func (d *Driver) carryOver() {
	member := d.s.Member()
	if d.s.Status() != session.Active || member.ID == "" {
		d.renewAnew()
		return
	}
	body := d.cfg.Join
	body.MemberID, body.RenewToken = member.ID, member.Token
	d.send(d.newOp(&op{kind: KindJoin, carry: &body, member: member.Incarnation,
		deadline: d.now.Add(d.cfg.RequestTimeout)}))
}

// carryAnswered ends a renewal's rejoin: success (f nil) renews the
// member's token in place; a refusal, no answer or a token that would
// not outlive the old renews the member anew. Nothing, when the member
// is no longer the one it was sent for (removed and joined again
// meanwhile) or is no longer active (closing, rejoining).
func (d *Driver) carryAnswered(o *op, f *Failure, resp api.JoinResponse) {
	d.finish(o)
	if !d.carrying(o) {
		return
	}
	member := d.s.Member()
	oldExp, _ := TokenExpiry(o.carry.RenewToken) // the token it renews
	newExp, ok := TokenExpiry(resp.MemberToken)
	if f != nil || resp.MemberID != member.ID || !ok || !newExp.After(oldExp) {
		d.renewAnew()
		return
	}
	d.renewAt = renewTime(d.now, resp.MemberToken, d.cfg.MemberRenew)
	d.answeredSession(resp)
	d.pending = append(d.pending, session.MemberRenewed{Now: d.now, Response: resp})
}

// answeredSession keeps the session timeout a join answered (the
// coordinator's choice when the join named none: the group's) and the
// heartbeat_wait it holds a heartbeat for at most.
func (d *Driver) answeredSession(resp api.JoinResponse) {
	if resp.SessionTimeoutMs > 0 {
		d.session = time.Duration(resp.SessionTimeoutMs) * time.Millisecond
	}
	if resp.HeartbeatWaitMs > 0 {
		d.heartbeatWait = time.Duration(resp.HeartbeatWaitMs) * time.Millisecond
	}
}

// carrying: carry-over o is for the member as it is (the same
// incarnation, active). A retriable failure of it (no answer, 5xx, 429,
// the credential source failing) is tried again within its
// request_timeout: renewing anew releases every partition and meets the
// same outage at its join.
func (d *Driver) carrying(o *op) bool {
	return d.s.Member().Incarnation == o.member && d.s.Status() == session.Active
}

// renewAnew renews the member as a new one: every partition revoked and
// released, a leave, a join (session.RenewRequested).
func (d *Driver) renewAnew() {
	d.pending = append(d.pending, session.RenewRequested{Now: d.now})
}

// Renewed steps a rejoin of this member by its member id that the shell
// made itself (session.MemberRenewed: the new member token, the answer's
// grants) and moves the renewal's deadline to the new token's.
func (d *Driver) Renewed(now time.Time, resp api.JoinResponse) []Command {
	d.now = now
	if d.joined && !d.renewAt.IsZero() {
		d.renewAt = renewTime(now, resp.MemberToken, d.cfg.MemberRenew)
	}
	d.answeredSession(resp)
	d.pending = append(d.pending, session.MemberRenewed{Now: now, Response: resp})
	return d.flush()
}

// CancelJoin gives the first join up (the user's context ended):
// JoinResult follows with err.
func (d *Driver) CancelJoin(now time.Time, err error) []Command {
	d.now = now
	if o := d.join; o != nil && o.initial {
		d.finish(o)
		d.ended(o, &Failure{Err: err})
	}
	return d.flush()
}

// NextDeadline is when Tick must run next (zero: nothing is due).
func (d *Driver) NextDeadline() time.Time {
	next := d.s.NextDeadline()
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	earlier(d.renewAt)
	for _, o := range d.ops {
		if o.done {
			continue
		}
		earlier(o.retryAt)
		earlier(o.deadline)
		earlier(o.hedgeAt)
	}
	return next
}

// Answer steps the outcome of an attempt. Answers of attempts the driver
// no longer waits for (cancelled, expired) are dropped.
func (d *Driver) Answer(a Answered) []Command {
	if !d.answer(a) {
		return nil
	}
	return d.flush()
}

// AnswerMany steps the outcomes of several attempts, in order, as Answer
// of each in turn, except that the session steps what they queued
// together (flush): a shell whose answers arrive faster than it steps
// them (thousands of long polls ending at once) steps each batch with
// one walk of its partitions instead of one per answer.
func (d *Driver) AnswerMany(as []Answered) []Command {
	stepped := false
	for _, a := range as {
		stepped = d.answer(a) || stepped
	}
	if !stepped {
		return nil
	}
	return d.flush()
}

// answer applies one attempt's outcome (false: dropped, nothing changed).
func (d *Driver) answer(a Answered) bool {
	d.now = a.Now
	o := d.calls[a.Call]
	if o == nil {
		return false
	}
	delete(d.calls, a.Call)
	latest := o.call == a.Call
	if latest {
		o.call = 0
	} else { // an earlier attempt of a hedged commit
		o.hedged = slices.DeleteFunc(o.hedged, func(c uint64) bool { return c == a.Call })
	}
	if a.Failure == nil {
		o.round = 0
	}
	switch o.kind {
	case KindJoin:
		d.joinAnswered(o, a)
	case KindHeartbeat:
		d.beatAnswered(o, a)
	case KindFetch:
		d.fetchAnswered(o, a)
	case KindCommit, KindLeave:
		d.retryAnswered(o, a, latest)
	}
	return true
}

func (d *Driver) newOp(o *op) *op {
	d.ops = append(d.ops, o)
	return o
}

// finish ends o for good.
func (d *Driver) finish(o *op) {
	o.done = true
	if o.call != 0 {
		d.out = append(d.out, Cancel{Call: o.call})
		delete(d.calls, o.call)
		o.call = 0
	}
	for _, call := range o.hedged { // a hedged commit's earlier attempts
		d.out = append(d.out, Cancel{Call: call})
		delete(d.calls, call)
	}
	o.hedged = nil
}

// hedge leaves commit o's attempt in flight running, silent past the
// margin, and sends another (Send.Hedge). With replicas a silent
// attempt is either at a frozen replica, which never answers (so the
// next one is asked in time: heartbeatMargin), or at a leader writing it
// to a slow state log (Kafka moving the log's leader), which answers
// once the write commits. Before, the attempt was given up: each retry
// queued behind the write in flight and waited for a write of its own,
// so with every write slower than the margin every attempt was given up
// and a commit that had landed was reported failed at request_timeout
// (e2e/ha TestSlowStateLogCommitLands). Now the first answer of any
// attempt decides. At most hedgedMax earlier attempts stay in flight.
func (d *Driver) hedge(o *op) {
	o.hedgeAt = time.Time{}
	if len(o.hedged) >= hedgedMax {
		return // the attempts in flight decide, or request_timeout
	}
	o.hedged = append(o.hedged, o.call)
	o.call = 0
	o.hedging = true
	d.send(o)
	o.hedging = false
}

// send starts one attempt of o.
func (d *Driver) send(o *op) {
	if d.stopped {
		return
	}
	d.nextCall++
	o.call = d.nextCall
	d.calls[o.call] = o
	s := Send{Call: o.call, Kind: o.kind}
	switch o.kind {
	case KindJoin:
		s.Join, s.JoinKey, s.Timeout = &d.cfg.Join, o.key, d.cfg.RequestTimeout
		if o.initial || o.carry != nil { // what is left of its bound, at most request_timeout
			s.Timeout = min(s.Timeout, o.deadline.Sub(d.now))
		}
		if o.carry != nil {
			s.Join = o.carry
		}
		if d.cfg.Replicas {
			s.Timeout = min(s.Timeout, d.joinMargin(o.round))
		}
	case KindHeartbeat:
		member := d.s.Member()
		o.member, o.token, s.Token = member.Incarnation, member.Token, member.Token
		s.Wait = d.s.HeartbeatWait(d.now, d.cfg.HeartbeatWait)
		o.resync, s.Resync = d.resync, d.resync
		s.Timeout = s.Wait + d.heartbeatMargin()
	case KindFetch:
		o.gateway = d.gateway
		s.Token, s.Fetch, s.Gateway = o.fetch.Capability, &o.fetch, o.gateway
		s.Timeout = d.cfg.FetchMaxWait + d.cfg.RequestTimeout
	case KindCommit:
		s.Token, s.Commit = o.commit.Token, d.commitBody(o.commit)
		s.Timeout = o.deadline.Sub(d.now)
		if d.cfg.Replicas {
			// Answered after one log transaction: an attempt silent past
			// the margin may be at a silent replica, and another goes to
			// the next (heartbeatMargin), the silent one left running
			// (hedge). A commit sent twice is the same offsets twice; a
			// release landed twice is answered done the second time too,
			// the partition moved on or not (the coordinator takes an
			// exact repeat of a commit that landed as done). The first
			// answer decides, and a refusal waits for the attempts still
			// in flight.
			if at := d.now.Add(d.heartbeatMargin()); at.Before(o.deadline) {
				o.hedgeAt = at
			}
			s.Hedge = o.hedging
		}
	case KindLeave:
		s.Token, s.Timeout = o.token, o.deadline.Sub(d.now)
	}
	d.out = append(d.out, s)
}

// heartbeatMargin is how long a heartbeat attempt may take beyond its
// wait. A coordinator answers a held heartbeat by the wait; with
// replicas, one silent well past it is gone while its socket stays open
// (SIGSTOP, a frozen host, a network that swallows bytes: nothing is
// refused), and the member must reach the standby that took over before
// the session the standby gave it — session_timeout from the takeover —
// runs out. Waiting request_timeout (10 s by default, 13 s with the
// wait) lost every member its session there (session 10 s after a
// takeover of ~1.5 s): e2e/ha's TestLeaderPausedMembersKeepSessions. So
// the margin is half of what session_timeout leaves after two waits, at
// least 250 ms, at most request_timeout; a slow leader's answer given up
// this way is only a retry (a lost heartbeat answer is resent: resync).
// Timing decides only whom the member asks, never what it may read.
// A commit attempt gets the same (a release held by a silent replica
// for request_timeout failed unanswered, and the handoff waited for its
// handoff_timeout: TestLeaderPausedReleaseLands), past which another
// attempt goes out, the silent one left running (hedge). With one coordinator
// there is nobody else to ask: request_timeout.
//
// The wait is the one the coordinator holds a heartbeat for: the
// smaller of Config.HeartbeatWait and the heartbeat_wait the join
// answered. The Kafka listener's members ask for 10 s and are held for
// the coordinator's heartbeat_wait (3 s by default): counted at 10 s,
// two waits outlast the session and the margin fell to its floor.
func (d *Driver) heartbeatMargin() time.Duration {
	if !d.cfg.Replicas {
		return d.cfg.RequestTimeout
	}
	session := d.session
	if session <= 0 {
		session = time.Duration(d.cfg.Join.SessionTimeoutMs) * time.Millisecond
	}
	wait := d.cfg.HeartbeatWait
	if d.heartbeatWait > 0 {
		wait = min(wait, d.heartbeatWait)
	}
	margin := (session - 2*wait) / 2
	return min(max(margin, 250*time.Millisecond), d.cfg.RequestTimeout)
}

// joinKey draws a join's key (Send.JoinKey): 126 random bits in hex,
// from Config.Rand (seeded in the simulation; the SDK's and the Kafka
// listener's draw from a source seeded at random per process), so
// another process's join — even with the same credential — never
// repeats it. "" without a Rand.
func (d *Driver) joinKey() string {
	if d.cfg.Rand == nil {
		return ""
	}
	return fmt.Sprintf("%016x%016x", d.cfg.Rand(math.MaxInt64), d.cfg.Rand(math.MaxInt64))
}

// joinMargin is how long a join attempt may take with replicas, after
// round attempts given up or failed. A join is answered after one log
// transaction, as a commit is; a replica silent past the margin is gone
// while its socket stays open (SIGSTOP, a frozen host), and the retry
// goes to the next, which answers or points at the leader. Waiting the
// whole request_timeout on a paused leader failed a first join outright
// (e2e/ha TestFirstJoinPastAPausedLeader) and a renewal's carry-over fell
// back to renewing anew. heartbeatMargin, but at least a quarter of
// request_timeout: a join's session may not be known yet (the first
// join, naming none). Only the first attempt of a join gets the margin;
// the next ones request_timeout (what is left of the join's): the first
// give-up moved the replica list on, and a leader that is alive but slow
// (a state log whose writes take seconds; a join queued behind the
// write in flight, two writes) writes every attempt it was sent,
// answered or not — each one given up leaves a member nobody
// heartbeats, holding its share of the group's partitions until
// session_timeout. At the margin every time, every attempt to a leader
// slower than it was given up: the first join failed, and a rejoin left
// a member behind every attempt for ever (TestJoinPastASlowLeader).
// JoinMargin is how long the first attempt of a join may take
// (joinMargin): for a shell that sends a rejoin of its own (the Kafka
// listener's carry-over), so that a silent replica holds it no longer
// than it would hold the driver's joins.
func (d *Driver) JoinMargin() time.Duration { return d.joinMargin(0) }

func (d *Driver) joinMargin(round int) time.Duration {
	if round > 0 {
		return d.cfg.RequestTimeout
	}
	return min(max(d.heartbeatMargin(), d.cfg.RequestTimeout/4), d.cfg.RequestTimeout)
}

func (d *Driver) commitBody(c session.Commit) *api.CommitRequest {
	offsets := c.Offsets
	if d.cfg.Bugs.CommitAhead {
		offsets = slices.Clone(offsets)
		for i := range offsets {
			if offsets[i].Offset >= 0 {
				offsets[i].Offset++ // planted bug: one record it never processed
			}
		}
	}
	return &api.CommitRequest{Offsets: offsets, Release: c.Release}
}

// retry schedules o's next attempt after a backoff; when the backoff
// would end past o's deadline, the deadline ends o with this failure.
func (d *Driver) retry(o *op, f *Failure) {
	o.last = f
	wait := Backoff(o.round, d.cfg.RetryBackoff, d.cfg.RetryBackoffMax, f.RetryAfter, d.cfg.Rand)
	o.round++
	o.retryAt = d.now.Add(wait)
	if !o.deadline.IsZero() && !o.retryAt.Before(o.deadline) {
		o.retryAt = time.Time{} // the deadline ends it with this failure
	}
}

// expire ends an op whose request_timeout passed.
func (d *Driver) expire(o *op) {
	f := o.last
	if f == nil || o.inFlight() {
		f = &Failure{Err: errDeadline}
	}
	d.finish(o)
	d.ended(o, f)
}

// ended reports a finished op's failure f (nil: success) where it goes.
func (d *Driver) ended(o *op, f *Failure) {
	switch o.kind {
	case KindJoin:
		if o.carry != nil { // request_timeout passed without an answer
			d.carryAnswered(o, f, api.JoinResponse{})
			return
		}
		d.join = nil
		if o.initial {
			d.out = append(d.out, JoinResult{Err: f.Err})
		} else {
			d.fail(f.Err)
		}
	case KindCommit:
		d.commitRemoved(o, f)
		done := session.CommitDone{Now: d.now, ID: o.commit.ID}
		if f != nil {
			done.Code, done.Err = f.code(), f.Err
		}
		d.pending = append(d.pending, done)
	case KindLeave:
		var err error
		if f != nil && f.Code != api.CodeUnknownMember { // already gone: left
			err = f.Err
		}
		if !o.renew {
			d.out = append(d.out, LeaveResult{Err: err})
		}
		done := session.LeaveDone{Now: d.now}
		if err != nil {
			done.Code = f.code()
		}
		d.pending = append(d.pending, done)
	}
}

// Backoff is the jittered exponential pause before retry round (from 0):
// base doubled per round up to limit, drawn in [d/2, d] with rnd
// (uniform in [0, n)), and never shorter than the server's hint.
func Backoff(round int, base, limit, hint time.Duration, rnd func(n int64) int64) time.Duration {
	d := base << min(round, 20)
	if d <= 0 || d > limit {
		d = limit
	}
	d = d/2 + time.Duration(rnd(int64(d/2)+1))
	return max(d, hint)
}
