package session

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Partition names one partition of one topic.
type Partition struct {
	Topic     string
	Partition int32
}

// String renders "topic/partition".
func (p Partition) String() string {
	return p.Topic + "/" + strconv.FormatInt(int64(p.Partition), 10)
}

func comparePartitions(a, b Partition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// Batch is the result of one fetch waiting to be delivered: records of
// one partition from Offset up to (not including) Next, Payload being the
// shell's decoded records. A batch with no records only moves the
// delivered offset (Kafka control records, compacted gaps).
type Batch struct {
	Partition Partition
	Epoch     uint64
	Offset    int64
	Next      int64
	Records   int
	Bytes     int64
	Payload   any
}

// Config bounds the session.
type Config struct {
	// BufferMaxBytes: no new fetch is issued while this many record bytes
	// wait to be delivered. The buffer can overshoot by the outstanding
	// fetches (one per partition, two with the shell's fetch ahead, each
	// of Fetch.MaxBytes).
	BufferMaxBytes int64
	// FetchMaxBytes is the most one fetch asks for. A fetch asks for its
	// partition's share of the buffer — BufferMaxBytes over two fetches
	// per fetching partition — but at least FetchFloorBytes (or
	// FetchMaxBytes when smaller) and at most FetchMaxBytes (fetchBytes).
	// 0: fetches carry no size (Fetch.MaxBytes 0, the shell's own).
	FetchMaxBytes int32
	// PollMaxRecords is the default cap on the records one Polled
	// delivers (whole batches, at least one).
	PollMaxRecords int
	// RevokeTimeout bounds how long a revoked partition waits for the user
	// to be done with records already delivered (waitsForUser: the next
	// Polled, a commit of everything, Close, or — with ManualMarks — marks
	// up to everything delivered); after it the processed offset is
	// committed as is and the partition released (RevokeTimedOut).
	RevokeTimeout time.Duration
	// ExpiryMargin: no fetch is issued with a capability that expires
	// within this margin; the partition waits for a renewal instead.
	ExpiryMargin time.Duration
	// ManualMarks: records count as processed only when the user marks
	// them (Marked) or names their offsets in a commit; Polled,
	// CommitRequested and CloseRequested do not mark what was delivered.
	// A revoked partition is released at its marked offset once its
	// revoke hook returned and the user is done with the records the
	// latest Polled handed it: marks reach everything delivered, or the
	// user came back (the next Polled, a commit of everything, Close) —
	// or RevokeTimeout passed. Without it, every Polled (and a commit or
	// close) marks everything delivered before.
	ManualMarks bool
	// CommitInterval: while held partitions have processed records not yet
	// committed, they are committed this long after the previous timed
	// commit, also when no record arrives any more (0: no timed commits).
	CommitInterval time.Duration
	// OffsetReset is this consumer's own start for a partition its group
	// has no committed offset for (a grant whose OffsetReset is set):
	// OffsetResetEarliest or OffsetResetLatest fetch from the log's start
	// or end (the gateway resolves it at the first fetch), as Kafka's
	// auto.offset.reset. Empty: the grant's offset (the group's
	// offset_reset). A committed offset always wins. The group's stored
	// settings are not touched.
	OffsetReset string
	// FullChecks walks the whole buffer after every step to assert its
	// invariants (O(buffered batches)); for tests and simulations. The
	// cheap assertions always run.
	FullChecks bool
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.BufferMaxBytes <= 0:
		return fmt.Errorf("session: buffer_max_bytes: must be > 0, got %d", c.BufferMaxBytes)
	case c.FetchMaxBytes < 0:
		return fmt.Errorf("session: fetch_max_bytes: must be >= 0, got %d", c.FetchMaxBytes)
	case c.PollMaxRecords <= 0:
		return fmt.Errorf("session: poll_max_records: must be > 0, got %d", c.PollMaxRecords)
	case c.RevokeTimeout <= 0:
		return fmt.Errorf("session: revoke_timeout: must be > 0, got %s", c.RevokeTimeout)
	case c.ExpiryMargin < 0:
		return fmt.Errorf("session: expiry_margin: must be >= 0, got %s", c.ExpiryMargin)
	case c.CommitInterval < 0:
		return fmt.Errorf("session: commit_interval: must be >= 0, got %s", c.CommitInterval)
	case c.OffsetReset != "" && c.OffsetReset != OffsetResetEarliest && c.OffsetReset != OffsetResetLatest:
		return fmt.Errorf("session: offset_reset: must be empty, %q or %q, got %q", OffsetResetEarliest, OffsetResetLatest, c.OffsetReset)
	}
	return nil
}

// Status is the member's lifecycle.
type Status uint8

// Statuses, in lifecycle order.
const (
	Idle      Status = iota // not joined yet
	Active                  // joined: fetching, heartbeating
	Rejoining               // the member was lost; a Rejoin is under way
	Closing                 // revoking everything before leaving (renewing: then rejoining)
	Leaving                 // Leave sent
	Stopped                 // over
)

var statusNames = [...]string{"idle", "active", "rejoining", "closing", "leaving", "stopped"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// Member is the identity the session joined with. Incarnation counts
// joins; results of requests made under an older incarnation are dropped.
type Member struct {
	ID          string
	Token       string
	Incarnation uint64
}

// Session is the consumer's per-partition logic. It is not safe for
// concurrent use: the shell serializes Step calls.
type Session struct {
	cfg    Config
	status Status
	member Member
	// heartbeatWait is the coordinator's cap from the join response.
	heartbeatWait time.Duration
	// renewing: this Closing ends in a rejoin, not a stop (RenewRequested).
	renewing bool

	parts map[Partition]*partition
	// revoking counts the parts in state Revoking: with none, the walks
	// that look for a partition to release (releaseReady, NextDeadline)
	// are skipped — an idle consumer of 2,000 partitions did both on
	// every step.
	revoking int
	// seen is the highest epoch ever held per partition, kept after
	// release so stale grants stay ignored.
	seen map[Partition]uint64

	queue       []Batch
	queuedBytes int64

	commits map[uint64]*commitState
	// releases counts the release commits in flight (MaxReleasesInFlight).
	releases int
	tickets  map[uint64]*ticketState
	// lastTimedCommit is when the last timed or background commit was
	// sent (or the member joined).
	lastTimedCommit time.Time
	lane

	lastID   uint64
	out      []Action
	advances uint64 // Advances
}

// New returns an Idle session; it panics on an invalid Config (the shell
// validates its own configuration first).
func New(cfg Config) *Session {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return &Session{
		cfg:     cfg,
		parts:   map[Partition]*partition{},
		seen:    map[Partition]uint64{},
		commits: map[uint64]*commitState{},
		tickets: map[uint64]*ticketState{},
	}
}

// Step applies one event and returns what the shell must do, in order.
// The returned slice is the caller's.
func (s *Session) Step(e Event) []Action {
	s.apply(e)
	s.advance(e.now())
	out := s.out
	s.out = nil
	return out
}

// StepMany applies events in order and then does the work that follows
// them once, at the latest of their times: as Step of each in turn, as
// if they had happened at the same instant. The work that follows an
// event (advance: releases, the commit lane, the leave, new fetches,
// the invariant checks) walks every held partition, so a shell holding
// thousands of partitions that stepped their answers one at a time did
// that walk once per answer: the 2,000 cancelled fetches of a Close took
// ~1 s on a loaded 2-core machine, and a burst of 2,000 long polls
// ending together held the shell's lock for as long. The returned slice
// is the caller's.
func (s *Session) StepMany(events []Event) []Action {
	if len(events) == 0 {
		return nil
	}
	var now time.Time
	for _, e := range events {
		s.apply(e)
		if t := e.now(); t.After(now) {
			now = t
		}
	}
	s.advance(now)
	out := s.out
	s.out = nil
	return out
}

// apply applies one event's own change; advance does what follows.
func (s *Session) apply(e Event) {
	switch e := e.(type) {
	case Joined:
		s.joined(e)
	case NewsArrived:
		s.news(e)
	case HeartbeatFailed:
		s.heartbeatFailed(e)
	case FetchDone:
		s.fetchDone(e)
	case Polled:
		s.polled(e)
	case Marked:
		s.marked(e)
	case CommitRequested:
		s.commitRequested(e)
	case CommitDone:
		s.commitDone(e)
	case HookDone:
		s.hookDone(e)
	case Tick:
	case CloseRequested:
		s.closeRequested(e)
	case RenewRequested:
		s.renewRequested(e)
	case MemberRenewed:
		s.memberRenewed(e)
	case LeaveDone:
		s.leaveDone()
	default:
		panic(fmt.Sprintf("session: unknown event %T", e))
	}
}

// advance does the work that follows any change: release revoked
// partitions that are ready, leave once closing is done, start fetches.
func (s *Session) advance(now time.Time) {
	s.advances++
	s.releaseReady(now)
	s.splitNext()
	s.laneNext(now)
	if s.status == Closing && len(s.parts) == 0 {
		s.status = Leaving
		s.emit(Leave{Token: s.member.Token, Renew: s.renewing})
	}
	if s.status == Active {
		s.fill(now)
	}
	s.check()
}

func (s *Session) emit(a Action) { s.out = append(s.out, a) }

func (s *Session) nextID() uint64 {
	s.lastID++
	return s.lastID
}

// Advances counts the times the session did the work that follows
// events, each a walk of every held partition: one per Step, one per
// StepMany. For tests and benchmarks of shells (client/driver steps what
// waits together).
func (s *Session) Advances() uint64 { return s.advances }

// Status reports the lifecycle state.
func (s *Session) Status() Status { return s.status }

// Member reports the joined identity (zero before the first join).
func (s *Session) Member() Member { return s.member }

// Assigned lists the partitions held and being fetched, sorted; revoked
// partitions still being released are not listed.
func (s *Session) Assigned() []Partition {
	out := make([]Partition, 0, len(s.parts))
	for id, p := range s.parts {
		if p.state == Fetching {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, comparePartitions)
	return out
}

// PartitionInfo is a held partition's state, for inspection.
type PartitionInfo struct {
	State     State
	Epoch     uint64
	Next      int64 // offset of the next fetch
	Delivered int64 // offset after the last record handed to the user
	Processed int64 // offset after the last record the user processed
	Committed int64 // highest offset the coordinator accepted
	// Capability is the partition's current capability (renewals
	// included) and ExpiresAt its expiry (zero: unknown).
	Capability string
	ExpiresAt  time.Time
}

// Inspect reports p's state; false when p is not held.
func (s *Session) Inspect(p Partition) (PartitionInfo, bool) {
	h := s.parts[p]
	if h == nil {
		return PartitionInfo{}, false
	}
	return PartitionInfo{
		State: h.state, Epoch: h.epoch, Next: h.next,
		Delivered: h.delivered, Processed: h.processed, Committed: h.committed,
		Capability: h.capability, ExpiresAt: h.expiresAt,
	}, true
}

// Buffered reports the records and bytes waiting to be delivered.
func (s *Session) Buffered() (records int, bytes int64) {
	for _, b := range s.queue {
		records += b.Records
	}
	return records, s.queuedBytes
}

// HeartbeatWait is the wait_ms to send with the next heartbeat: at most
// limit (and the coordinator's heartbeat_wait), and short enough that the
// heartbeat returns by the time the earliest capability passes half its
// lease, so the next heartbeat is there to be renewed. The lease is
// measured from when the capability arrived. Never below 1 ms.
func (s *Session) HeartbeatWait(now time.Time, limit time.Duration) time.Duration {
	wait := limit
	if s.heartbeatWait > 0 && s.heartbeatWait < wait {
		wait = s.heartbeatWait
	}
	for _, p := range s.parts {
		if p.state != Fetching || p.expiresAt.IsZero() {
			continue
		}
		half := p.renewedAt.Add(p.expiresAt.Sub(p.renewedAt) / 2)
		if d := half.Sub(now); d > 0 && d < wait {
			wait = d
		}
	}
	return max(wait, time.Millisecond)
}

// NextDeadline is when the session next needs a Tick: a revoked partition
// that waits only for the user's acknowledgement times out then, and
// processed records not yet committed are committed then (timed commits).
// Zero when nothing is timed. A partition still waiting for its fetch,
// hook or commits is released by the step that ends the wait, so it needs
// no Tick.
func (s *Session) NextDeadline() time.Time {
	next := s.timedCommitDue()
	if s.revoking == 0 {
		return next
	}
	for _, p := range s.parts {
		if p.state != Revoking || p.releasing || !s.waitsForUser(p) ||
			p.fetch != 0 || p.hook != 0 || p.commits > 0 {
			continue
		}
		if at := p.revokedAt.Add(s.cfg.RevokeTimeout); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}

// check asserts the invariants that must hold after every step.
func (s *Session) check() {
	if s.queuedBytes < 0 {
		panic(fmt.Sprintf("session: queued bytes %d < 0", s.queuedBytes))
	}
	if s.laneBusy < 0 || s.splitting < 0 || s.splitting > MaxSplitCommitsInFlight {
		panic(fmt.Sprintf("session: %d lane commits in flight, %d of them split", s.laneBusy, s.splitting))
	}
	revoking := 0
	for id, p := range s.parts {
		if p.processed > p.delivered || p.delivered > p.next {
			panic(fmt.Sprintf("session: %s offsets out of order: processed %d delivered %d next %d",
				id, p.processed, p.delivered, p.next))
		}
		if p.state == Revoking {
			revoking++
		}
	}
	if revoking != s.revoking {
		panic(fmt.Sprintf("session: %d partitions revoking, counted %d", revoking, s.revoking))
	}
	if !s.cfg.FullChecks {
		return
	}
	var bytes int64
	for _, b := range s.queue {
		p := s.parts[b.Partition]
		if p == nil || p.state != Fetching || p.epoch != b.Epoch {
			panic(fmt.Sprintf("session: queued batch of %s epoch %d not held for fetching", b.Partition, b.Epoch))
		}
		bytes += b.Bytes
	}
	if bytes != s.queuedBytes {
		panic(fmt.Sprintf("session: queued bytes %d, batches hold %d", s.queuedBytes, bytes))
	}
}
