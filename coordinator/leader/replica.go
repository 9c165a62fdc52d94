package leader

import (
	"fmt"
	"time"
)

// Replica is the replica shell's decisions around one Elector, with no IO
// and time as an argument. coordinator/replica*.go (the binary: goroutines,
// the Kafka log, HTTP) and e2e/sim/replica.go (the simulation: the
// in-memory log, simulated time) both run it, so the simulation checks
// the decisions the binary makes, not a second model of them:
//
//   - which commits of the log count: Observe steps a follower's position
//     only when it applied commits since the last one stepped (a position
//     seen twice is no sign of life), counts takeover barriers (a
//     candidate's fence marker, written before it knows whether it can
//     serve) once between two writes of a leader, and tells a replica
//     writing under this replica's id apart by its URL;
//   - whether it may stand at all: Unfit (the follower's check, or a
//     Promote, found it cannot serve the log) stops it for good;
//   - what to do and when: Next (the Elector's Decide) marks the action it
//     returns as in flight; Promoted, Wrote and Stopped step the outcomes,
//     a finished step-down only after the outcome of a beat still in
//     flight (the Elector's contract);
//   - what the HTTP side answers: View (role, whom to name, whether the
//     machine serves) and Route;
//   - which answers must be confirmed by the log before they leave:
//     MustConfirm (the shell confirms with store.WriteMark).
//
// Not safe for concurrent use: one goroutine (the shell's elect loop, or
// the simulation's event loop) owns it.
type Replica struct {
	e   *Elector
	id  string
	url string

	applied  uint64 // the follower's Commits last stepped
	barriers uint64 // ... and its Barriers
	// barrier: a barrier was counted as a live writer since the last
	// leader write; later ones are not.
	barrier bool
	sameID  bool // another replica was seen writing under our id
	stopped bool // the step-down finished while a beat was in flight
	last    Decision
	stats   Stats
}

// Stats count what a replica did, for metrics and the simulation's
// report.
type Stats struct {
	// Takeovers: promotions that succeeded.
	Takeovers int
	// StepDowns: times it stopped leading.
	StepDowns int
	// FencedWrites: writes of its leadership (a beat, a Ready's persist)
	// the log refused fenced.
	FencedWrites int
	// Promotions: takeovers attempted (Promote decided).
	Promotions int
}

// Position is what a follower of the shard's log applied so far
// (store.Position without the offset).
type Position struct {
	// Commits applied since the follower opened.
	Commits uint64
	// Barriers among Commits: takeover barriers (store.Position).
	Barriers uint64
	// Writer of the last commit applied.
	Writer string
	// Leader is the last beat applied.
	Leader Hint
	// Resigned: the last commit applied is its writer's resignation
	// (store.Position.Resigned, a clean shutdown's last write).
	Resigned bool
}

// View is what the replica answers with.
type View struct {
	Role Role
	// Leader is whom a not_leader answer names: this replica (its id and
	// URL) while it leads.
	Leader Hint
	Reason string
	// Serving: requests go to the machine (it leads; its promotion built
	// the machine from the log read to its end).
	Serving bool
	// Unfit says why this replica can never take the log over ("" = it
	// can): it is no standby (/readyz 503).
	Unfit string
}

// NewReplica returns the decisions of a replica advertised at url that
// starts following at now.
func NewReplica(cfg Config, url string, now time.Time) *Replica {
	r := &Replica{e: New(cfg, now), id: cfg.ID, url: url}
	r.last = Decision{Role: Follower, Reason: "started"}
	return r
}

// Following: a new follower of the log opened (its Commits count from
// zero).
func (r *Replica) Following() { r.applied, r.barriers, r.barrier = 0, 0, false }

// Observe steps the follower's position p if it applied commits since the
// last one stepped. Commits that were all takeover barriers count once
// between two writes of a leader: a winner's barrier precedes its first
// beat (the others give it a lease), but a candidate whose takeovers keep
// failing after its barrier must not keep every other replica from
// standing. It returns true the first time it sees another replica write
// under this replica's id (replica.id left empty on several): that
// replica's commits are told apart by its URL, so they count as a live
// leader instead of as this replica's own old ones.
func (r *Replica) Observe(now time.Time, p Position) (sameID bool) {
	if p.Commits == r.applied {
		return false
	}
	if p.Barriers < r.barriers || p.Commits-p.Barriers < r.applied-r.barriers {
		r.Following() // a new follower's position, before the shell said so: it counts from zero
	}
	writes := p.Commits-p.Barriers != r.applied-r.barriers
	r.applied, r.barriers = p.Commits, p.Barriers
	if !writes && r.barrier {
		return false
	}
	r.barrier = !writes
	writer, hint := p.Writer, p.Leader
	if writer == r.id && hint.ID == writer && hint.URL != r.url && !p.Resigned { // a resignation names no URL
		sameID = !r.sameID
		r.sameID = true
		writer += "@" + hint.URL
		hint.ID = writer
	}
	r.e.Step(now, Observed{Writer: writer, Leader: hint, Resigned: p.Resigned, Takeover: !writes})
	return sameID
}

// Next is the decision at now: the action to perform (returned once; call
// Next again after stepping its outcome, and at Decision.At at the
// latest).
func (r *Replica) Next(now time.Time) Decision {
	d := r.e.Decide(now)
	switch d.Do {
	case StepDown:
		r.stats.StepDowns++
	case Promote:
		r.stats.Promotions++
	}
	r.last = d
	return d
}

// Promoted steps the outcome of a Promote: err nil once the log was
// fenced, read to its end and the machine restored from it.
func (r *Replica) Promoted(now time.Time, err error, fenced bool) {
	if err == nil {
		r.stats.Takeovers++
	}
	r.e.Step(now, PromoteDone{Err: err, Fenced: fenced})
}

// Wrote steps the outcome of a write of the leadership: a Beat Next asked
// for (beat true), or a Ready's persist. It steps a step-down that
// finished while the beat was in flight right after.
func (r *Replica) Wrote(now time.Time, beat bool, err error, fenced bool) {
	if fenced {
		r.stats.FencedWrites++
	}
	r.e.Step(now, WriteDone{Beat: beat, Err: err, Fenced: fenced})
	if beat && r.stopped {
		r.stopped = false
		r.e.Step(now, Stopped{})
	}
}

// Unfit steps that this replica cannot serve the log (store.ErrIncompatible,
// from the follower's check or a Promote): it never stands again. It
// returns true the first time (log it then).
func (r *Replica) Unfit(now time.Time, reason string) (first bool) {
	first = r.e.unfit == ""
	r.e.Step(now, Unfit{Reason: reason})
	return first
}

// Stopped steps a finished step-down (the machine closed, a new follower
// open: call Following too) — deferred until the outcome of a beat in
// flight is in.
func (r *Replica) Stopped(now time.Time) {
	if r.e.beating {
		r.stopped = true
		return
	}
	r.e.Step(now, Stopped{})
}

// Role is the role now.
func (r *Replica) Role() Role { return r.e.Role() }

// Stats are the counts so far.
func (r *Replica) Stats() Stats { return r.stats }

// View is what the replica answers with, as of the last Next.
func (r *Replica) View() View {
	v := View{Role: r.last.Role, Leader: r.last.Leader, Reason: r.last.Reason, Unfit: r.last.Unfit}
	if v.Role == Leader {
		v.Leader, v.Serving = Hint{ID: r.id, URL: r.url}, true
	}
	return v
}

// Route is how a replica answers one request.
type Route uint8

const (
	// RouteServe: the machine serves it (the replica leads).
	RouteServe Route = iota
	// RoutePublic: the replica answers it itself (GET only): health,
	// standby readiness, its metrics, the key ring's JWKS, the API
	// document.
	RoutePublic
	// RouteNotLeader: 421 not_leader naming View.Leader ("" unknown).
	// It reads no credential: the answer holds nothing but the leader's
	// advertised URL, which every client is configured with anyway.
	RouteNotLeader
)

func (r Route) String() string {
	switch r {
	case RouteServe:
		return "serve"
	case RoutePublic:
		return "public"
	case RouteNotLeader:
		return "not_leader"
	}
	return fmt.Sprintf("route(%d)", uint8(r))
}

// PublicPaths are what a replica that does not lead still answers.
var PublicPaths = []string{"/healthz", "/readyz", "/metrics", "/.well-known/jwks.json", "/openapi.json"}

// Route says how the replica answers a request for path: every consumer,
// sync, admin, OAuth and console call goes to the machine while it
// serves, and gets not_leader otherwise.
func (v View) Route(path string) Route {
	if v.Serving {
		return RouteServe
	}
	for _, p := range PublicPaths {
		if p == path {
			return RoutePublic
		}
	}
	return RouteNotLeader
}

// Answer is what a leader is about to send.
type Answer uint8

const (
	// AnswerPersisted: released by a Ready that committed in the log
	// (join, commit, leave, admin writes): persist-before-send covers it.
	AnswerPersisted Answer = iota
	// AnswerSync: a sync poll's reply, answered from the machine's
	// memory (its resets carry fences).
	AnswerSync
	// AnswerCapabilities: a heartbeat's news carrying grants or renewals
	// from memory.
	AnswerCapabilities
	// AnswerNews: a heartbeat's news without capabilities (revocations at
	// most: a stale one only makes a member release early).
	AnswerNews
)

// MustConfirm: the answer leaves only once a log transaction this writer
// began after the request arrived committed (store.WriteMark.Confirm) —
// the broker commits none of a deposed writer's, so a leader deposed
// while it had nothing to write sends nothing from memory that the new
// leader may already have superseded.
func MustConfirm(a Answer) bool { return a == AnswerSync || a == AnswerCapabilities }
