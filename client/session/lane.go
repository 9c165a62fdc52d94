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
