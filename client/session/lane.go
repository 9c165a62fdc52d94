package session

import (
	"errors"
	"fmt"
	"time"

	"github.com/capgate/capgate/api"
)

// The commit lane: every commit that is not a release (the user's, the
// background ones asked for with CommitRequested{Async}, the timed ones)
// goes one at a time. Two commits of one partition in flight at once
// could reach the coordinator out of order, and the later one, carrying
// the lower offset, would be refused offset_regression although nothing
// went wrong. Releases need no lane: a revoked partition waits for its
// commits in flight before its release is sent.
//
// Background requests never wait for each other: while a commit is in
// flight they are merged into the next one (the latest processed offsets
// of every partition any of them named), which answers them all. That is
// what keeps a poll loop going while no coordinator answers (a
// failover): nothing waits for the commit but the request's own answer.
// Merging also bounds what waits: one request, however many were made.
type lane struct {
	// laneBusy counts the lane's commits in flight (chunks and split
	// retries of one request).
	laneBusy int
	// syncQueue holds user requests waiting for the lane, in order.
	syncQueue []laneJob
	// waiting: the request the next background commit answers (0:
	// none; later ones are merged into it), which commits every
	// processed partition (waitAll) or those named (at the epoch named).
	waiting    uint64
	waitAll    bool
	waitNamed  map[Partition]uint64
	background ticketState // the background commit in flight: first failure
	carried    uint64      // the request it answers (0: a timed commit)
	// split holds the partitions of refused lane commits waiting to go
	// again alone (splitNext); each counts in laneBusy, and in its
	// ticket's pending commits, until it is sent or dropped. splitting
	// counts those sent and not answered (MaxSplitCommitsInFlight).
	split     []laneSplit
	splitting int
}

// laneSplit is one partition of a refused lane commit, waiting to go
// again alone.
type laneSplit struct {
	ticket uint64
	p      *partition
}

// MaxSplitCommitsInFlight bounds the commits of one partition each in
// flight that a refused lane commit of several partitions was split
// into (the coordinator takes a commit whole or not at all, and one
// partition's expired or fenced capability must not hold the others
// back). Sent all at once, a member of 2,000 partitions whose
// capabilities expired while a paused leader's standby took over sent
// 2,000 commits together, each refused token_expired: 1,732 in flight,
// 441 connections at the new leader, commits refused 503 overloaded, and
// the gateways' sync polls from the same address starved until they
// refused every fetch out_of_sync (chaos11: an e2e/ha reproduction on
// branch chaos11-storm-e2e, not stable enough under load for CI).
const MaxSplitCommitsInFlight = 8

// queueSplit queues partition p of a refused commit of ticket to go
// again alone.
func (s *Session) queueSplit(ticket uint64, p *partition) {
	s.split = append(s.split, laneSplit{ticket: ticket, p: p})
	s.laneBusy++
	if t := s.tickets[ticket]; t != nil {
		t.pending++
	}
}

// splitNext sends the queued split commits while fewer than
// MaxSplitCommitsInFlight are in flight. A partition no longer fetched
// under the same grant is dropped: a revoked one's release commits its
// processed offset, a lost one's commit would be refused.
func (s *Session) splitNext() {
	for len(s.split) > 0 && s.splitting < MaxSplitCommitsInFlight {
		job := s.split[0]
		s.split[0] = laneSplit{}
		s.split = s.split[1:]
		s.laneBusy--
		p := job.p
		if s.status != Active || s.parts[p.id] != p || p.state != Fetching {
			s.dropSplit(job)
			continue
		}
		if t := s.tickets[job.ticket]; t != nil {
			t.pending-- // sendCommitChunk counts it again
		}
		s.splitting++
		s.sendCommitChunk(job.ticket, []*partition{p}, false).alone = true
	}
	if len(s.split) == 0 {
		s.split = nil
	}
}

// dropSplit ends a queued split commit that is not sent: its request
// fails when the member was lost meanwhile (nothing it named was
// committed), and is answered when it was the last of its commits.
func (s *Session) dropSplit(job laneSplit) {
	t := s.tickets[job.ticket]
	if job.ticket == 0 {
		t = &s.background
	}
	if s.status == Rejoining && t != nil && t.code == "" && t.err == nil {
		t.code, t.err = api.CodeUnknownMember, errNotSent
	}
	s.finishTicket(job.ticket)
	if job.ticket == 0 && s.laneBusy == 0 {
		s.finishBackground()
	}
}

// laneJob is a user request waiting for the lane: parts at their
// processed offsets (named: the user named them; a partition no longer
// held then is refused stale_epoch instead of skipped).
type laneJob struct {
	ticket uint64
	parts  []*partition
	named  bool
}

// errNotSent answers background requests the session could not send
// because it stopped being Active while they waited.
var errNotSent = errors.New("session: not sent: the consumer closed or lost its partitions while the commit waited")

// commitAsync checks and records a background request; the lane sends it.
// Named offsets move the processed offset forward only (a Mark), so
// merged requests only ever commit further.
func (s *Session) commitAsync(e CommitRequested) {
	if code, err := s.checkOffsets(e.Offsets); code != "" {
		s.emit(CommitResult{Ticket: e.Ticket, Code: code, Err: err})
		return
	}
	if len(e.Offsets) == 0 {
		s.userReturned()
		s.waitAll = true
	}
	for _, m := range e.Offsets {
		p := s.parts[m.Partition]
		p.processed = max(p.processed, m.Offset)
		if s.waitNamed == nil {
			s.waitNamed = map[Partition]uint64{}
		}
		s.waitNamed[m.Partition] = m.Epoch
	}
	if s.waiting != 0 {
		s.emit(CommitMerged{Ticket: e.Ticket, Into: s.waiting})
		return
	}
	s.waiting = e.Ticket
}

// laneNext sends what waits for the lane while nothing is in flight:
// user requests first (their caller is blocked), then the merged
// background requests, then a timed commit when due.
func (s *Session) laneNext(now time.Time) {
	for s.laneBusy == 0 {
		switch {
		case len(s.syncQueue) > 0:
			job := s.syncQueue[0]
			s.syncQueue = s.syncQueue[1:]
			s.sendJob(job)
		case s.waiting != 0:
			s.sendBackground(now)
		default:
			s.timedCommit(now)
			return
		}
	}
}

// sendJob sends a user request that waited, at the processed offsets of
// its partitions then.
func (s *Session) sendJob(job laneJob) {
	if s.status == Rejoining {
		// Lost while it waited: its partitions are gone uncommitted (a
		// release commits a revoked one; a lost member commits nothing).
		s.emit(CommitResult{Ticket: job.ticket, Code: api.CodeUnknownMember, Err: errNotSent})
		return
	}
	var parts []*partition
	for _, p := range job.parts {
		held := s.status == Active && s.parts[p.id] == p && p.state == Fetching
		switch {
		case !held && job.named:
			err := fmt.Errorf("session: commit %s epoch %d: no longer held", p.id, p.epoch)
			s.emit(CommitResult{Ticket: job.ticket, Code: api.CodeStaleEpoch, Err: err})
			return
		case held && p.processed > p.committed:
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		s.emit(CommitResult{Ticket: job.ticket})
		return
	}
	s.tickets[job.ticket] = &ticketState{}
	s.sendCommit(job.ticket, parts, false)
}

// sendBackground sends the commit of the waiting background request.
func (s *Session) sendBackground(now time.Time) {
	s.carried, s.waiting = s.waiting, 0
	all, named := s.waitAll, s.waitNamed
	s.waitAll, s.waitNamed = false, nil
	s.lastTimedCommit = now
	if s.status != Active {
		code := api.Code("")
		if s.status == Rejoining {
			code = api.CodeUnknownMember
		}
		s.background = ticketState{code: code, err: errNotSent}
		s.finishBackground()
		return
	}
	var parts []*partition
	if all {
		parts = s.dirty()
	}
	for id, epoch := range named {
		p := s.parts[id]
		switch {
		case p == nil || p.state != Fetching || p.epoch != epoch:
			if s.background.code == "" {
				s.background.code = api.CodeStaleEpoch
				s.background.err = fmt.Errorf("session: commit %s epoch %d: no longer held", id, epoch)
			}
		case p.processed > p.committed && !all:
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		s.finishBackground()
		return
	}
	s.sendCommit(0, parts, false)
}

// finishBackground answers the request the background commit carried
// with its outcome (the first failure of its chunks and retries).
func (s *Session) finishBackground() {
	if s.carried != 0 {
		s.emit(CommitResult{Ticket: s.carried, Code: s.background.code, Err: s.background.err})
	}
	s.carried, s.background = 0, ticketState{}
}
