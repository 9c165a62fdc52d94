package session

import (
	"fmt"
	"slices"
	"time"

	"github.com/capgate/capgate/api"
)

// commitState remembers what one Commit action named.
type commitState struct {
	ticket      uint64
	incarnation uint64
	release     bool
	alone       bool // a partition of a refused lane commit, sent again alone (splitNext)
	parts       []*partition
	offsets     []api.CommitOffset
}

// ticketState counts the commits still serving one user request.
type ticketState struct {
	pending int
	code    api.Code
	err     error
}

// commitRequested commits the processed offset of every fetching
// partition that moved since its last commit, or exactly the offsets the
// user named. Revoking partitions are committed by their release instead.
// A partition whose capability is about to expire (or expired) is
// committed all the same: the coordinator accepts it within its leeway,
// or its refusal reaches the user; nothing is left out silently. The
// commit goes through the lane (lane.go): at once when no other commit is
// in flight, else right after it. An Async request is merged with the
// lane's other background requests instead.
func (s *Session) commitRequested(e CommitRequested) {
	if e.Async {
		s.commitAsync(e)
		return
	}
	if len(e.Offsets) > 0 {
		s.commitOffsets(e)
		return
	}
	s.userReturned()
	parts := s.dirty()
	if len(parts) == 0 {
		s.emit(CommitResult{Ticket: e.Ticket})
		return
	}
	s.syncQueue = append(s.syncQueue, laneJob{ticket: e.Ticket, parts: parts})
}

// dirty lists the fetching partitions processed beyond their committed
// offset (none unless Active).
func (s *Session) dirty() []*partition {
	var parts []*partition
	if s.status != Active {
		return nil
	}
	for _, p := range s.parts {
		if p.state == Fetching && p.processed > p.committed {
			parts = append(parts, p)
		}
	}
	return parts
}

// checkOffsets checks the offsets a commit names: each must name a
// partition held at its epoch and an offset between the committed and
// the delivered one. It returns the first problem's code and error.
func (s *Session) checkOffsets(marks []Mark) (api.Code, error) {
	for _, m := range marks {
		p := s.parts[m.Partition]
		var code api.Code
		var why string
		switch {
		case s.status != Active || p == nil || p.state != Fetching || p.epoch != m.Epoch:
			code, why = api.CodeStaleEpoch, "not held at this epoch"
		case m.Offset > p.delivered:
			code, why = api.CodeBadRequest, fmt.Sprintf("beyond the records delivered (%d)", p.delivered)
		case m.Offset < p.committed:
			code, why = api.CodeOffsetRegression, fmt.Sprintf("below the committed offset %d", p.committed)
		}
		if code != "" {
			return code, fmt.Errorf("session: commit %s@%d epoch %d: %s", m.Partition, m.Offset, m.Epoch, why)
		}
	}
	return "", nil
}

// commitOffsets commits exactly the offsets named, after checking every
// one of them; one bad offset sends nothing.
func (s *Session) commitOffsets(e CommitRequested) {
	if code, err := s.checkOffsets(e.Offsets); code != "" {
		s.emit(CommitResult{Ticket: e.Ticket, Code: code, Err: err})
		return
	}
	var parts []*partition
	for _, m := range e.Offsets {
		p := s.parts[m.Partition]
		p.processed = m.Offset
		if !slices.Contains(parts, p) {
			parts = append(parts, p)
		}
	}
	parts = slices.DeleteFunc(parts, func(p *partition) bool { return p.processed == p.committed })
	if len(parts) == 0 {
		s.emit(CommitResult{Ticket: e.Ticket})
		return
	}
	s.syncQueue = append(s.syncQueue, laneJob{ticket: e.Ticket, parts: parts, named: true})
}

// marked moves processed offsets forward to the user's marks.
func (s *Session) marked(e Marked) {
	for _, m := range e.Marks {
		p := s.parts[m.Partition]
		if p == nil || p.epoch != m.Epoch || m.Offset > p.delivered {
			continue
		}
		p.processed = max(p.processed, m.Offset)
	}
}

// timedCommitDue is when the next timed commit is due: zero when timed
// commits are off, a commit of the lane is in flight, or nothing
// processed waits.
func (s *Session) timedCommitDue() time.Time {
	if s.cfg.CommitInterval <= 0 || s.status != Active || s.laneBusy > 0 {
		return time.Time{}
	}
	for _, p := range s.parts {
		if p.state == Fetching && p.processed > p.committed {
			return s.lastTimedCommit.Add(s.cfg.CommitInterval)
		}
	}
	return time.Time{}
}

// timedCommit commits the processed offsets when the interval passed
// since the last timed (or background) commit, whether or not records
// still arrive.
func (s *Session) timedCommit(now time.Time) {
	due := s.timedCommitDue()
	if due.IsZero() || now.Before(due) {
		return
	}
	s.lastTimedCommit = now
	s.sendCommit(0, s.dirty(), false)
}

// sendCommit emits one Commit naming parts at their processed offsets.
func (s *Session) sendCommit(ticket uint64, parts []*partition, release bool) {
	slices.SortFunc(parts, func(a, b *partition) int { return comparePartitions(a.id, b.id) })
	for len(parts) > MaxCommitPartitions {
		s.sendCommitChunk(ticket, parts[:MaxCommitPartitions], release)
		parts = parts[MaxCommitPartitions:]
	}
	s.sendCommitChunk(ticket, parts, release)
}

// MaxCommitPartitions bounds the partitions of one commit request: each
// carries its capability (~700 bytes), and the coordinator refuses bodies
// over max_body_bytes (1 MiB by default). Larger commits are sent in
// chunks under the same ticket.
const MaxCommitPartitions = 500

func (s *Session) sendCommitChunk(ticket uint64, parts []*partition, release bool) *commitState {
	c := &commitState{ticket: ticket, incarnation: s.member.Incarnation, release: release, parts: parts}
	if !c.release { // the lane's (lane.go)
		s.laneBusy++
	} else {
		s.releases++
	}
	until := time.Time{}
	for _, p := range parts {
		offset := p.processed
		if offset < 0 {
			offset = -1 // release without moving the committed offset
		}
		c.offsets = append(c.offsets, api.CommitOffset{
			Topic: p.id.Topic, Partition: p.id.Partition, Offset: offset, Capability: p.capability,
		})
		p.commits++
		if !p.expiresAt.IsZero() && (until.IsZero() || p.expiresAt.Before(until)) {
			until = p.expiresAt
		}
	}
	id := s.nextID()
	s.commits[id] = c
	if t := s.tickets[ticket]; t != nil {
		t.pending++
	}
	s.emit(Commit{ID: id, Ticket: ticket, Token: s.member.Token, Offsets: c.offsets, Release: release, Until: until})
	return c
}

// commitDone applies a commit's outcome. A refused multi-partition commit
// is retried one partition at a time (the coordinator accepts a commit
// whole or not at all, and one moved partition must not hold back the
// others). A release completes even when refused: the partition is given
// up either way, and the coordinator moves it on its own after
// handoff_timeout.
func (s *Session) commitDone(e CommitDone) {
	c := s.commits[e.ID]
	if c == nil {
		return
	}
	delete(s.commits, e.ID)
	if !c.release {
		s.laneBusy--
	} else {
		s.releases--
	}
	if c.alone {
		s.splitting--
	}
	for _, p := range c.parts {
		p.commits--
	}
	current := c.incarnation == s.member.Incarnation
	switch {
	case e.Code == "":
		for i, p := range c.parts {
			p.committed = max(p.committed, c.offsets[i].Offset)
		}
	case current && api.NeedsRejoin(e.Code):
		s.fail(c, e.Code, e.Err)
		s.lost()
	case current && len(c.parts) > 1 && splittable(e.Code) && c.release:
		// Each goes again alone, as releaseReady has room: sent at once,
		// a refused release of a thousand partitions (a member revoked:
		// every capability fenced) was a thousand requests at once.
		for _, p := range c.parts {
			if s.parts[p.id] == p {
				p.releasing, p.releaseAlone = false, true
			}
		}
	case current && len(c.parts) > 1 && splittable(e.Code):
		// Each goes again alone, MaxSplitCommitsInFlight at a time
		// (splitNext): sent at once, a refused commit of 2,000
		// partitions (capabilities expired across a takeover) was 2,000
		// requests at once.
		for _, p := range c.parts {
			if s.parts[p.id] == p {
				s.queueSplit(c.ticket, p)
			}
		}
	default:
		s.fail(c, e.Code, e.Err)
	}
	if c.release {
		for _, p := range c.parts {
			if p.commits == 0 && s.parts[p.id] == p && p.releasing {
				s.detach(p)
			}
		}
	}
	s.finishTicket(c.ticket)
	if !c.release && c.ticket == 0 && s.laneBusy == 0 {
		s.finishBackground()
	}
}

// splittable: a refusal one partition's offset or capability can cause
// (the others may be fine).
func splittable(code api.Code) bool {
	switch code {
	case api.CodeStaleEpoch, api.CodeOffsetRegression, api.CodeTokenExpired, api.CodeCapabilityRevoked, api.CodeForbidden:
		return true
	}
	return false
}

// fail records the first failure of c's user request, or of the
// background commit c belongs to.
func (s *Session) fail(c *commitState, code api.Code, err error) {
	t := s.tickets[c.ticket]
	if !c.release && c.ticket == 0 {
		t = &s.background
	}
	if t != nil && t.code == "" && t.err == nil {
		t.code, t.err = code, err
	}
}

func (s *Session) finishTicket(ticket uint64) {
	t := s.tickets[ticket]
	if t == nil {
		return
	}
	if t.pending--; t.pending > 0 {
		return
	}
	delete(s.tickets, ticket)
	s.emit(CommitResult{Ticket: ticket, Code: t.code, Err: t.err})
}

// releaseReady commits and releases the revoked partitions that are done:
// no fetch in flight, the hook returned, no commit in flight, and the
// user done with what Poll handed it (waitsForUser), or RevokeTimeout
// passed since the revoke. The commit carries the old capability, which
// the coordinator accepts while the partition is revoking from this
// member. A partition released at RevokeTimeout while the user may still
// hold its records is reported (RevokeTimedOut): the next holder starts
// at the processed offset and reads those records again, perhaps while
// this user still processes them.
func (s *Session) releaseReady(now time.Time) {
	if s.revoking == 0 || s.releases >= MaxReleasesInFlight {
		return
	}
	var ready, alone []*partition
	var overdue []Overdue
	for _, p := range s.parts {
		if p.state != Revoking || p.releasing || p.fetch != 0 || p.hook != 0 || p.commits > 0 {
			continue
		}
		if p.releaseAlone {
			alone = append(alone, p)
			continue
		}
		switch {
		case !s.waitsForUser(p):
		case now.Before(p.revokedAt.Add(s.cfg.RevokeTimeout)):
			continue
		default:
			overdue = append(overdue, Overdue{Partition: p.id, Processed: p.processed, Delivered: p.delivered})
		}
		ready = append(ready, p)
	}
	if len(ready) > 0 {
		if len(overdue) > 0 {
			slices.SortFunc(overdue, func(a, b Overdue) int { return comparePartitions(a.Partition, b.Partition) })
			s.emit(RevokeTimedOut{Partitions: overdue, Timeout: s.cfg.RevokeTimeout})
		}
		for _, p := range ready {
			p.releasing = true
		}
		s.sendCommit(0, ready, true)
	}
	slices.SortFunc(alone, func(a, b *partition) int { return comparePartitions(a.id, b.id) })
	for _, p := range alone {
		if s.releases >= MaxReleasesInFlight {
			return
		}
		p.releasing, p.releaseAlone = true, false
		s.sendCommit(0, []*partition{p}, true)
	}
}

// MaxReleasesInFlight bounds the release commits in flight: partitions
// that become ready while that many are out wait and go together in the
// next one (releaseReady runs after every step), and those a refused
// release split go alone, that many at a time. Released one by one as
// each partition's fetch ended, a member revoked a thousand partitions
// sent ~1,000 requests at once, one connection each: past the
// coordinator's max_connections_per_address (1,000), which then refused
// every client of that address (503 overloaded) — the other members'
// heartbeats and the handoff itself stalled (e2e/ha
// TestLeaderKilledDuringABulkMemberRevoke).
const MaxReleasesInFlight = 8
