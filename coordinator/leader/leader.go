// Package leader is the pure leadership decision of a coordinator replica
// (DESIGN §9): from what a replica observed in its shard's log and what
// its own log operations returned, it decides whether the replica follows,
// stands for leadership, leads, or steps down. It does no IO and reads no
// clock: time is an argument, and the replica shell (coordinator/replica.go)
// or the deterministic simulation (e2e/sim) performs the actions.
//
// # Failure detection: leader beats in the log
//
// The leader of a shard writes a small transaction to the shard's log —
// a beat, carrying its id and advertised URL (store.LogStore.Beat) — every
// BeatInterval, besides the transactions of its Readys. Followers tail the
// log (store.Follower); every commit they apply is an Observed event. A
// follower that observed no commit for LeaseTimeout (+ its Stagger) stands:
// it promotes (store.Follower.Promote: fence, barrier, read to the end).
// No Kafka group membership is used: the log is the only shared medium,
// and a leader that cannot write its beats is, to everyone else, dead.
//
// # Safety is the log's fencing, never this package's timing
//
// Timing here only decides WHEN a replica tries: two replicas may both
// believe they lead for a while (a paused leader, a slow follower). Safety
// comes from the store: Promote fences every earlier writer of the shard
// before it reads the log to its end, so an earlier leader's next write —
// a beat or a Ready — fails fenced, and this package answers that failure
// (WriteFailed) by stepping down at once. Since the shell sends nothing it
// did not persist first, a deposed leader sends nothing new.
//
// Nor does a leader step down on its own clock alone. One whose writes
// have not succeeded for LeaseTimeout — paused past the takeover, or on a
// slow log, or cut off from it — asks the log: it beats at once (the
// renewal). A renewal that commits proves nobody fenced it (the broker
// commits nothing of a writer after a newer InitProducerID): it keeps
// leading, and a short pause causes no failover. A fenced renewal steps
// it down. Only when no write succeeds within one more lease (the log
// unreachable) does it step down without an answer; whoever took over
// had fenced it already.
//
// # How a shell (or the simulation) drives it
//
// Both drive it through Replica (replica.go), which adds the rest of the
// shell's decisions (which positions count, outcomes in order, the view,
// routing, confirmations); the contract below is the Elector's own.
//
//	e := leader.New(cfg, now)
//	for {
//		d := e.Decide(now)          // at once after every Step, and at d.At
//		switch d.Do {
//		case leader.Promote:        // Follower.Promote, then serve from the result
//			err := follower.Promote(ctx)
//			e.Step(now, leader.PromoteDone{Err: err, Fenced: errors.Is(err, store.ErrFenced)})
//		case leader.Beat:           // LogStore.Beat(id, url)
//			err := log.Beat(...)
//			e.Step(now, leader.WriteDone{Err: err, Fenced: errors.Is(err, store.ErrFenced)})
//		case leader.StepDown:       // stop serving as leader, close the writer, follow again
//			...
//			e.Step(now, leader.Stopped{})
//		}
//		// a follower's every applied commit:  e.Step(now, leader.Observed{Writer: pos.Writer, Leader: ...})
//		// the leader's persist failing:       e.Step(now, leader.WriteDone{Err: err, Fenced: ...})
//	}
//
// Each action is returned once; until its outcome is stepped in, Decide
// returns None for it (a Beat in flight is not asked for twice); the
// shell steps Stopped only once every action it started has returned (a
// Beat's outcome included: step it, then Stopped). Decide
// also says whom to name in a not_leader answer (Decision.Leader) and when
// to call it again at the latest (Decision.At). An Elector is not safe for
// concurrent use: one goroutine owns it.
package leader

import (
	"fmt"
	"time"
)

// Role is what a replica is for its shard.
type Role uint8

const (
	// Follower tails the log and answers not_leader.
	Follower Role = iota
	// Candidate is promoting: fencing the shard's earlier writers and
	// reading the log to its end. It answers not_leader.
	Candidate
	// Leader serves: its writes are the shard's.
	Leader
	// SteppingDown stopped leading (a fenced or failed write, a newer
	// writer seen, a lost lease) and is tearing its writer down; it
	// answers not_leader and sends nothing new.
	SteppingDown
)

func (r Role) String() string {
	switch r {
	case Follower:
		return "follower"
	case Candidate:
		return "candidate"
	case Leader:
		return "leader"
	case SteppingDown:
		return "stepping-down"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// Action is what the shell must do now.
type Action uint8

const (
	// None: nothing to do until an event or Decision.At.
	None Action = iota
	// Promote: fence the shard, read its log to the end, then serve
	// (store.Follower.Promote); step PromoteDone.
	Promote
	// Beat: write a leader beat to the shard's log (store.LogStore.Beat);
	// step WriteDone.
	Beat
	// StepDown: stop serving, drop the writer, follow again; step Stopped.
	StepDown
)

func (a Action) String() string {
	switch a {
	case None:
		return "none"
	case Promote:
		return "promote"
	case Beat:
		return "beat"
	case StepDown:
		return "step-down"
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// Config is one replica's leadership settings.
type Config struct {
	// ID names this replica in the log (store.LogOptions.WriterID).
	ID string
	// BeatInterval is how often a leader writes a beat.
	BeatInterval time.Duration
	// LeaseTimeout: a follower that observed no commit for this long
	// stands. A leader whose writes have not succeeded for this long
	// renews: it writes a beat at once and keeps leading if it commits
	// (nobody fenced it), steps down if it fails fenced; if no write
	// succeeded within one more LeaseTimeout (cut off from the log) it
	// steps down anyway.
	LeaseTimeout time.Duration
	// LeaseTimeoutMax is how far a slow log stretches LeaseTimeout (zero,
	// or not above LeaseTimeout: never stretched). A follower stands
	// after twice the longest of the last slowSamples intervals between
	// two commits of one writer it observed; a leader whose lease lapsed
	// keeps renewing for twice the longest of the same intervals between
	// its own last writes, beats and Ready persists alike (a beat's own
	// duration, and its promotion, counted too); each at least
	// LeaseTimeout, at most LeaseTimeoutMax. On a starved machine a
	// beat's transaction takes seconds: with the lease fixed at one second a live leader stepped
	// down just before its beat committed, followers fenced a leader
	// whose beats were only slow, and candidates whose promotions took
	// 2-3.5 s fenced one another in turn (e2e/ha at load 15-18). The
	// stretch follows the log's recent pace and falls back as soon as
	// commits come quickly again. Timing only: fencing decides safety.
	LeaseTimeoutMax time.Duration
	// Stagger is this replica's extra wait before standing, so replicas
	// noticing the same silence do not all fence each other (any value
	// is safe; below LeaseTimeout).
	Stagger time.Duration
}

// Validate reports a setting the decision cannot work with.
func (c Config) Validate() error {
	switch {
	case c.ID == "":
		return fmt.Errorf("leader: empty replica id")
	case c.BeatInterval <= 0:
		return fmt.Errorf("leader: beat interval %s must be positive", c.BeatInterval)
	case c.LeaseTimeout < 2*c.BeatInterval:
		return fmt.Errorf("leader: lease timeout %s must be at least twice the beat interval %s", c.LeaseTimeout, c.BeatInterval)
	case c.Stagger < 0 || c.Stagger >= c.LeaseTimeout:
		return fmt.Errorf("leader: stagger %s must be within [0, lease timeout %s)", c.Stagger, c.LeaseTimeout)
	case c.LeaseTimeoutMax < 0:
		return fmt.Errorf("leader: lease timeout max %s must not be negative", c.LeaseTimeoutMax)
	}
	return nil
}

// Hint names a leader: its replica id and advertised URL, as its beat in
// the log says. The zero Hint is "unknown".
type Hint struct {
	ID  string
	URL string
}

// Event is something the shell observed.
type Event interface{ event() }

// Observed: the follower applied a commit of the log. Writer is the
// WriterID of the last commit applied; Leader the last beat applied.
// Resigned: that commit is Writer's resignation — a leader shutting down
// cleanly wrote it last and writes nothing more — so a follower stands
// after its Stagger alone instead of LeaseTimeout + Stagger (a hand-over;
// it still fences, so this is timing, never safety).
//
// Takeover: that commit is a takeover's barrier (Writer is a candidate
// that fenced the shard and now reads the log to its end and restores
// the state before its first beat); with LeaseTimeoutMax set, the
// follower gives it the lease stretched by the log's pace but at least
// LeaseTimeoutMax/2 to write again — a promotion is several of the
// log's transactions and the restore (e2e/ha at load 15-30: 1.2-8 s),
// and a follower that stood after one lease fenced it, then was fenced
// in turn. Not the whole max on a quick log: a candidate that died
// after its barrier kept the shard leaderless LeaseTimeoutMax + stagger
// (4.6 s at the defaults, review25).
type Observed struct {
	Writer   string
	Leader   Hint
	Resigned bool
	Takeover bool
}

// PromoteDone is the outcome of a Promote. Fenced: a newer writer fenced
// this one while it promoted (another replica won the race).
type PromoteDone struct {
	Err    error
	Fenced bool
}

// WriteDone is the outcome of one of the leader's writes: a Beat it was
// asked for (Beat true) or the persist of a Ready (Beat false). Fenced: a
// newer writer deposed this one.
type WriteDone struct {
	Beat   bool
	Err    error
	Fenced bool
}

// Stopped: the shell finished stepping down and follows the log again.
type Stopped struct{}

// Unfit: this replica cannot serve the shard's log, whatever the timing —
// its settings differ from the ones the log was written under, or its KEK
// does not open the key ring (store.ErrIncompatible), found by the
// follower's check or by a Promote. It never stands again (a replica is
// reconfigured by restarting it); Reason names what differs.
type Unfit struct {
	Reason string
}

func (Observed) event()    {}
func (PromoteDone) event() {}
func (WriteDone) event()   {}
func (Stopped) event()     {}
func (Unfit) event()       {}

// Decision is what Decide says.
type Decision struct {
	Role Role
	// Do is the action to perform now (returned once).
	Do Action
	// At is when to call Decide again at the latest; zero: only after the
	// next event.
	At time.Time
	// Leader is whom a not_leader answer names: the last leader seen in
	// the log (zero while unknown, or once the log was silent for half a
	// lease: the leader is likely gone); this replica while it leads.
	Leader Hint
	// Reason says why the role last changed, for logs and /readyz.
	Reason string
	// Unfit says why this replica never stands ("" = it may): what
	// Unfit stepped.
	Unfit string
}

// Elector is one replica's leadership decision for one shard.
type Elector struct {
	cfg    Config
	role   Role
	reason string
	hint   Hint

	// Follower: when the log last showed a live writer (or this replica
	// started following).
	seen time.Time
	// Actions returned by Decide whose outcome is not in yet.
	promoting, beating, stopping bool
	// Leader: when its last write succeeded, and when the last beat
	// finished (the next is due BeatInterval later).
	wrote   time.Time
	beatEnd time.Time
	// renewBy: the lease lapsed; a write must succeed by then (zero: the
	// lease holds).
	renewBy time.Time
	// unfit: why this replica cannot serve the log (Unfit); it never
	// stands while set.
	unfit string
	// resigned: the writer whose resignation is the last commit observed
	// ("" when it is not one).
	resigned string

	// pace: how slow the log is now (lease); lastWriter and lastAt: the
	// last commit a follower observed; promoteAt and beatAt: when the
	// Promote and the Beat in flight were decided.
	pace                      pace
	lastWriter                string
	lastAt, promoteAt, beatAt time.Time
	// takeover: the last commit a follower observed is another
	// replica's takeover barrier (Observed.Takeover).
	takeover bool
}

// slowSamples is how many recent intervals pace keeps: with beats every
// 200 ms, a log fast again shrinks the lease back within ~2 s.
const slowSamples = 8

// pace keeps the last slowSamples intervals the log took: between two
// commits of one writer (a follower), or one of the leader's beats or
// promotions.
type pace struct {
	last [slowSamples]time.Duration
	next int
}

func (p *pace) add(d time.Duration) {
	p.last[p.next] = max(d, 0)
	p.next = (p.next + 1) % slowSamples
}

func (p *pace) slowest() time.Duration {
	var m time.Duration
	for _, d := range p.last {
		m = max(m, d)
	}
	return m
}

// lease is LeaseTimeout stretched by the log's recent pace
// (Config.LeaseTimeoutMax).
func (e *Elector) lease() time.Duration {
	if e.cfg.LeaseTimeoutMax <= e.cfg.LeaseTimeout {
		return e.cfg.LeaseTimeout
	}
	paced := min(max(2*e.pace.slowest(), e.cfg.LeaseTimeout), e.cfg.LeaseTimeoutMax)
	if e.takeover && e.role == Follower {
		// A candidate's barrier: it still reads the log to its end and
		// restores the state before its first beat. Half the max at
		// least, the whole max only once the log's pace asks for it: a
		// candidate that dies after its barrier on a quick log is taken
		// over ~2 s later, not LeaseTimeoutMax (review25).
		return max(paced, e.cfg.LeaseTimeoutMax/2)
	}
	return paced
}

// New returns a follower that started following at now: it gives a live
// leader LeaseTimeout to show itself before standing.
func New(cfg Config, now time.Time) *Elector {
	if err := cfg.Validate(); err != nil {
		panic(err) // a shell validates its config first
	}
	return &Elector{cfg: cfg, role: Follower, seen: now, reason: "started"}
}

// Role is the current role.
func (e *Elector) Role() Role { return e.role }

// Step feeds one event.
func (e *Elector) Step(now time.Time, ev Event) {
	switch ev := ev.(type) {
	case Observed:
		e.observed(now, ev)
	case PromoteDone:
		e.promoteDone(now, ev)
	case WriteDone:
		e.writeDone(now, ev)
	case Stopped:
		if e.role != SteppingDown {
			panic(fmt.Sprintf("leader: Stopped in role %s", e.role))
		}
		e.role, e.stopping, e.seen, e.hint, e.takeover = Follower, false, now, Hint{}, false
	case Unfit:
		if ev.Reason == "" {
			panic("leader: Unfit without a reason")
		}
		e.unfit = ev.Reason
	default:
		panic(fmt.Sprintf("leader: unknown event %T", ev))
	}
}

func (e *Elector) observed(now time.Time, ev Observed) {
	switch e.role {
	case Follower, Candidate:
		if ev.Writer == "" {
			return
		}
		// Any commit is a live writer. The hint is the last beat, but
		// only once the writer of the last commit has beaten: a new
		// leader's barrier comes before its first beat, and until then
		// the old leader's URL would be wrong.
		if ev.Writer != e.cfg.ID {
			if ev.Writer == e.lastWriter && !e.lastAt.IsZero() {
				e.pace.add(now.Sub(e.lastAt))
			}
			e.lastWriter, e.lastAt, e.takeover = ev.Writer, now, ev.Takeover
			e.seen = now
		}
		if ev.Resigned && ev.Writer != e.cfg.ID {
			// The leader handed over: its lease ends now.
			e.seen, e.hint, e.resigned = now.Add(-e.lease()), Hint{}, ev.Writer
			return
		}
		e.resigned = ""
		if ev.Leader.ID == ev.Writer {
			e.hint = ev.Leader
		} else {
			e.hint = Hint{}
		}
	case Leader:
		if ev.Writer != "" && ev.Writer != e.cfg.ID {
			e.stepDown("another writer (" + ev.Writer + ") committed to the log")
		}
	}
}

func (e *Elector) promoteDone(now time.Time, ev PromoteDone) {
	if e.role != Candidate || !e.promoting {
		panic(fmt.Sprintf("leader: PromoteDone in role %s without a Promote", e.role))
	}
	e.promoting = false
	e.pace.add(now.Sub(e.promoteAt)) // a fence and a barrier at least: the log's pace
	e.lastWriter, e.lastAt, e.takeover = "", time.Time{}, false
	if ev.Err != nil {
		// Someone else is taking over (fenced), or the log is unreachable:
		// follow again and give the winner a whole lease to show itself.
		e.role, e.seen = Follower, now
		e.reason = "promote failed: " + ev.Err.Error()
		return
	}
	e.role, e.reason = Leader, "promoted: fenced the earlier writers and read the log to its end"
	e.hint = Hint{ID: e.cfg.ID}
	e.wrote = now           // the barrier committed
	e.beatEnd = time.Time{} // beat at once: announce the URL
	e.renewBy = time.Time{}
}

func (e *Elector) writeDone(now time.Time, ev WriteDone) {
	if ev.Beat {
		e.beating, e.beatEnd = false, now
	}
	if e.role != Leader {
		if ev.Beat && ev.Err == nil {
			e.pace.add(now.Sub(e.beatAt))
		}
		return // late outcome of a write of the leadership being torn down
	}
	switch {
	case ev.Fenced:
		e.stepDown("fenced: a newer writer took the shard over")
	case ev.Err != nil:
		// The outcome of the write is unknown; nothing of it was sent.
		// Step down; whoever promotes next reads what the log holds.
		e.stepDown("write failed: " + ev.Err.Error())
	default:
		// Committed: no newer writer had fenced this one when it did.
		// The gap since its last write is the interval the followers
		// measured between its commits: the leader's pace must be
		// theirs, or a leader whose Ready persists (not its beats) were
		// slow stepped down while they still waited for it (e2e/ha at
		// load 20-24: 'no write succeeded for 2.6s' with the followers'
		// leases at 3.4 and 4.4 s, and a 7 s three-way takeover followed).
		took := now.Sub(e.wrote)
		if ev.Beat {
			took = max(took, now.Sub(e.beatAt))
		}
		e.pace.add(took)
		e.wrote, e.renewBy = now, time.Time{}
	}
}

func (e *Elector) stepDown(reason string) {
	e.role, e.reason, e.hint = SteppingDown, reason, Hint{}
}

// Decide says what to do at now.
func (e *Elector) Decide(now time.Time) Decision {
	d := Decision{Role: e.role, Leader: e.hint, Reason: e.reason, Unfit: e.unfit}
	switch e.role {
	case Follower:
		lease := e.lease()
		stand := e.seen.Add(lease + e.cfg.Stagger)
		if stale := e.seen.Add(lease / 2); !now.Before(stale) {
			// Half a lease without a commit: the leader is likely gone;
			// name nobody rather than send clients to it.
			d.Leader = Hint{}
		} else if now.Before(stand) || e.unfit != "" {
			d.At = stale
			return d
		}
		if e.unfit != "" {
			// It could not serve the log: standing would only fence
			// whoever can (and its barrier would read as a live
			// leader to the others). Nothing to wait for but events.
			return d
		}
		if now.Before(stand) {
			d.At = stand
			return d
		}
		// The leader it named is presumed dead: name nobody until the
		// next beat (this replica's own, or the winner's).
		e.role, e.promoting, e.hint, e.promoteAt = Candidate, true, Hint{}, now
		e.reason = fmt.Sprintf("no commit in the log for %s", now.Sub(e.seen))
		if e.resigned != "" {
			e.reason = "the leader (" + e.resigned + ") resigned"
		}
		d.Role, d.Do, d.Reason, d.Leader = Candidate, Promote, e.reason, Hint{}
	case Leader:
		e.decideLeader(now, &d)
	case SteppingDown:
		if !e.stopping {
			e.stopping = true
			d.Do = StepDown
		}
	}
	return d
}

func (e *Elector) decideLeader(now time.Time, d *Decision) {
	lease := e.wrote.Add(e.cfg.LeaseTimeout)
	if !now.Before(lease) {
		// No write succeeded for a lease: paused (SIGSTOP, a long GC), a
		// slow log, or cut off from it. Its own clock does not say which,
		// nor whether anyone took over: the log does. Renew: beat at once
		// (unless a write is in flight, whose outcome answers the same
		// question). Committed: nobody fenced it, it keeps leading (no
		// failover for a short pause). Fenced: it steps down (writeDone).
		// Nothing within one more lease: cut off; step down (liveness
		// only: whoever stood fenced it already).
		if e.renewBy.IsZero() {
			e.renewBy = now.Add(e.lease())
		}
		if !now.Before(e.renewBy) {
			e.stepDown(fmt.Sprintf("no write succeeded for %s (renewal included)", now.Sub(e.wrote)))
			e.stopping = true
			d.Role, d.Do, d.Leader, d.Reason = SteppingDown, StepDown, Hint{}, e.reason
			return
		}
		d.At = e.renewBy
		if !e.beating {
			e.beating, e.beatAt = true, now
			d.Do = Beat
		}
		return
	}
	d.At = lease
	if e.beating {
		return
	}
	due := e.beatEnd.Add(e.cfg.BeatInterval)
	if now.Before(due) {
		d.At = due
		return
	}
	e.beating, e.beatAt = true, now
	d.Do = Beat
}
