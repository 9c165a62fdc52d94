package session

import (
	"fmt"
	"slices"
	"time"

	"github.com/capgate/capgate/api"
)

// fill starts a fetch for every fetching partition that has none, may use
// its capability, and while the buffer has room.
func (s *Session) fill(now time.Time) {
	if s.queuedBytes >= s.cfg.BufferMaxBytes {
		return
	}
	var ready []*partition
	fetching := 0
	for _, p := range s.parts {
		if p.state != Fetching {
			continue
		}
		fetching++
		if p.fetch == 0 && !p.refused && !p.expiring(now, s.cfg.ExpiryMargin) {
			ready = append(ready, p)
		}
	}
	slices.SortFunc(ready, func(a, b *partition) int { return comparePartitions(a.id, b.id) })
	size := s.fetchBytes(fetching)
	for _, p := range ready {
		p.fetch = s.nextID()
		s.emit(Fetch{ID: p.fetch, Partition: p.id, Epoch: p.epoch, Offset: p.next, Capability: p.capability, MaxBytes: size, ExpiresAt: p.expiresAt})
	}
}

// FetchFloorBytes is the least a fetch asks for when FetchMaxBytes
// allows it (fetchBytes).
const FetchFloorBytes = 1 << 20

// fetchBytes is what a new fetch asks for: the buffer's share of one
// partition, BufferMaxBytes over two fetches (the one the shell fetches
// ahead included) per fetching partition, within [FetchFloorBytes,
// FetchMaxBytes]. A few partitions get large fetches — each costs the
// gateway and Kafka a request whatever its size, so a 2.7 MiB fetch read
// 1.15× the records/s of a 1 MiB one through the same gateway
// (BENCHMARKS.md §0) — while the buffer's overshoot stays within
// BufferMaxBytes as long as the share is above the floor.
func (s *Session) fetchBytes(fetching int) int32 {
	if s.cfg.FetchMaxBytes <= 0 {
		return 0
	}
	share := s.cfg.BufferMaxBytes / (2 * int64(max(fetching, 1)))
	floor := min(FetchFloorBytes, int64(s.cfg.FetchMaxBytes))
	return int32(min(max(share, floor), int64(s.cfg.FetchMaxBytes)))
}

// fetchDone takes a fetch's result. A result is dropped unless it answers
// the partition object's outstanding fetch: a late response admitted
// under an older epoch, or one cancelled by a revoke, never delivers.
func (s *Session) fetchDone(e FetchDone) {
	p := s.parts[e.Partition]
	if p == nil || p.fetch != e.ID {
		return
	}
	p.fetch = 0
	if p.state != Fetching || e.Canceled {
		return
	}
	switch {
	case e.Code == "":
		s.accept(p, e)
	case e.Code == api.CodeCapabilityRevoked:
		// The gateway fenced us: the coordinator's revoke is on its way;
		// stop now and hand the partition over as if it had arrived.
		s.startRevoke(e.Now, p)
		s.callRevoke([]Partition{p.id})
	case e.Code == api.CodeOffsetOutOfRange:
		s.outOfRange(p, e.Earliest, e.Latest)
	default:
		// Expired, unauthorized, forbidden, unknown partition, or a
		// non-retriable error: retrying the same capability cannot help.
		p.refused = true
	}
}

// accept queues a fetched batch (or an empty one that moves the offset).
func (s *Session) accept(p *partition, e FetchDone) {
	if p.next < 0 && e.Records == 0 && e.Next >= 0 {
		// The first answer at a start sentinel names the position it
		// resolved to, with no record before it: the partition starts
		// there, processed included, so the next commit keeps it (as a
		// Kafka consumer commits the position its reset chose) and the
		// group resumes there.
		p.next, p.delivered, p.processed = e.Next, e.Next, e.Next
		return
	}
	if e.Records == 0 && e.Next <= p.next {
		return
	}
	next := max(e.Next, p.next)
	s.queue = append(s.queue, Batch{
		Partition: p.id, Epoch: p.epoch, Offset: p.next, Next: next,
		Records: e.Records, Bytes: e.Bytes, Payload: e.Payload,
	})
	s.queuedBytes += e.Bytes
	p.next = next
}

// outOfRange moves the fetch position into [earliest, latest]. When
// nothing is pending the delivered and processed offsets follow, as no
// record lies between the old and new position.
func (s *Session) outOfRange(p *partition, earliest, latest int64) {
	target := p.next
	switch {
	case earliest >= 0 && p.next < earliest:
		target = earliest
	case latest >= 0 && p.next > latest && p.delivered <= latest:
		target = latest
	default:
		p.refused = true // bounds unknown or behind what was delivered
		return
	}
	idle := p.processed == p.delivered && p.delivered == p.next
	p.next = target
	if idle {
		p.delivered, p.processed = target, target
	}
}

// purge drops the undelivered batches of id.
func (s *Session) purge(id Partition) {
	s.queue = slices.DeleteFunc(s.queue, func(b Batch) bool {
		if b.Partition == id {
			s.queuedBytes -= b.Bytes
			return true
		}
		return false
	})
}

// userReturned: the user came back (Polled, a commit of everything,
// Close), so it is done with every record handed to it before. Without
// ManualMarks those records count as processed; with it only marks count
// (a record left unmarked is read again by the next holder), but no
// revoked partition waits for the user any more.
func (s *Session) userReturned() {
	for _, p := range s.parts {
		if !s.cfg.ManualMarks {
			p.processed = p.delivered
		}
		p.inHand = false
	}
}

// polled acknowledges earlier deliveries and delivers the next batches.
func (s *Session) polled(e Polled) {
	s.userReturned()
	limit := e.MaxRecords
	if limit <= 0 {
		limit = s.cfg.PollMaxRecords
	}
	var out []Batch
	records, taken := 0, 0
	for _, b := range s.queue {
		if records > 0 && records+b.Records > limit {
			break
		}
		taken++
		s.queuedBytes -= b.Bytes
		p := s.parts[b.Partition]
		if p == nil || p.state != Fetching || p.epoch != b.Epoch {
			panic(fmt.Sprintf("session: delivering a batch of %s epoch %d not held for fetching", b.Partition, b.Epoch))
		}
		p.delivered = b.Next
		if b.Records > 0 {
			p.inHand = true
			out = append(out, b)
			records += b.Records
		}
	}
	s.queue = slices.Delete(s.queue, 0, taken)
	s.emit(Deliver{Batches: out})
}
