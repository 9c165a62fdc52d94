package session

import (
	"slices"
	"time"

	"github.com/capgate/capgate/api"
)

// commitState remembers what one Commit action named.
type commitState struct {
	ticket      uint64
	incarnation uint64
	release     bool
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
// partition that moved since its last commit. Revoking partitions are
// committed by their release instead.
func (s *Session) commitRequested(e CommitRequested) {
	s.ackDelivered()
	var parts []*partition
	if s.status == Active {
		for _, p := range s.parts {
			if p.state == Fetching && p.processed > p.committed && !p.expiring(e.Now, 0) {
				parts = append(parts, p)
			}
		}
	}
	if len(parts) == 0 {
		s.emit(CommitResult{Ticket: e.Ticket})
		return
	}
	s.tickets[e.Ticket] = &ticketState{}
	s.sendCommit(e.Ticket, parts, false)
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

func (s *Session) sendCommitChunk(ticket uint64, parts []*partition, release bool) {
	c := &commitState{ticket: ticket, incarnation: s.member.Incarnation, release: release, parts: parts}
	for _, p := range parts {
		offset := p.processed
		if offset < 0 {
			offset = -1 // release without moving the committed offset
		}
		c.offsets = append(c.offsets, api.CommitOffset{
			Topic: p.id.Topic, Partition: p.id.Partition, Offset: offset, Capability: p.capability,
		})
		p.commits++
	}
	id := s.nextID()
	s.commits[id] = c
	if t := s.tickets[ticket]; t != nil {
		t.pending++
	}
	s.emit(Commit{ID: id, Ticket: ticket, Token: s.member.Token, Offsets: c.offsets, Release: release})
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
		s.fail(c.ticket, e.Code, e.Err)
		s.lost()
	case current && len(c.parts) > 1 && splittable(e.Code):
		for _, p := range c.parts {
			if s.parts[p.id] == p {
				s.sendCommit(c.ticket, []*partition{p}, c.release)
			}
		}
	default:
		s.fail(c.ticket, e.Code, e.Err)
	}
	if c.release {
		for _, p := range c.parts {
			if p.commits == 0 && s.parts[p.id] == p {
				s.detach(p)
			}
		}
	}
	s.finishTicket(c.ticket)
}

func splittable(code api.Code) bool {
	return code == api.CodeStaleEpoch || code == api.CodeOffsetRegression
}

func (s *Session) fail(ticket uint64, code api.Code, err error) {
	if t := s.tickets[ticket]; t != nil && t.code == "" && t.err == nil {
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
// user acknowledged what was delivered (or RevokeTimeout passed). The
// commit carries the old capability, which the coordinator accepts while
// the partition is revoking from this member.
func (s *Session) releaseReady(now time.Time) {
	var ready []*partition
	for _, p := range s.parts {
		if p.state != Revoking || p.releasing || p.fetch != 0 || p.hook != 0 || p.commits > 0 {
			continue
		}
		acked := p.processed == p.delivered
		if acked || !now.Before(p.revokedAt.Add(s.cfg.RevokeTimeout)) {
			ready = append(ready, p)
		}
	}
	if len(ready) == 0 {
		return
	}
	for _, p := range ready {
		p.releasing = true
	}
	s.sendCommit(0, ready, true)
}
