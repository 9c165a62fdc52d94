package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Merged fetches: several fetches of different partitions led by one
// broker, in one Kafka Fetch.
//
// Why: as deployed, a 1-record fetch through the gateway costs it one
// HTTP read and write plus one Kafka write and read; those syscalls, not
// capgate's code, are most of its CPU (BENCHMARKS.md §0). One Fetch for N
// partitions is one write and one read for N, and one request for the
// broker to parse.
//
// How (natural batching, never a timer): a fetch that does not wait
// (MaxWait 0) goes to its broker at once while fewer than
// MergeFetchesAfter such exchanges are in flight there, exactly as
// before. Beyond that it queues. When an exchange ends, its fetch hands
// the broker's slot to the oldest queued fetch, which becomes the leader
// of the next exchange: it takes every queued fetch of another partition
// (a request names a partition once), sends one Fetch for all of them
// and itself, and hands each its answer. So a lone fetch never waits for
// company, and under load the batch grows with the queue. A fetch whose
// partition is already queued does not queue behind it (it could never
// share its request): it leads at once, with the queued fetches of other
// partitions, so concurrent fetches of one partition still go side by
// side as before; nor does one when the broker's last eight fetches were
// all of its own partition (nothing to merge with). Nor does a fetch
// wait longer than MergeWaitMax queued: an exchange in flight that does
// not answer (a half-open connection, a cold read) would otherwise hold
// every queued fetch of the broker for its whole request timeout; past
// the bound the fetch takes a slot of its own and leads.
//
// Safety, as for a fetch of its own:
//   - A queued or merged fetch whose context ends returns at once (cancel
//     before ack); its part of the answer, if one comes, is released
//     unread, never returned. A leader whose context ends cuts the
//     exchange (its connection's interrupt) and returns at once; the
//     fetches it carried go again (errMergeRetry), each on its own
//     context.
//   - Every fetch gets only its own partition's answer and keeps its own
//     error handling (leader errors, out of range); the gateway decides
//     again per fetch after the broker answered, as before.
//   - Sizes: each partition asks for its own max bytes, cut to them on the
//     way back, first batch whole as Kafka does. But Kafka serves an
//     oversized first batch whole only for the first partition of a
//     request: a later partition whose next batch is larger than it asked
//     for comes back empty (or, past the request's total, not at all).
//     Such a partition is fetched again alone, and the size its first
//     batch needed is remembered (hints), so that the next merged fetch
//     of it asks for that much and is cut to its own max bytes after.
//   - Only fetches of at most mergeMaxBytes merge: a larger answer would
//     hold the others' behind its bytes.
//   - Shared answer buffers are released when the last part is.
//
// Long polls never merge (they keep their own connections: one holder's
// waits never delay another's fetches, #10).

// mergeMaxBytes is the largest max bytes of a fetch that merges.
const mergeMaxBytes = 64 << 10

// mergeMaxParts bounds the partitions one merged Fetch carries.
const mergeMaxParts = 64

// errMergeRetry is handed to the fetches a merged exchange carried when
// its leader's context ended and cut it: each goes again.
var errMergeRetry = errors.New("broker: merged exchange cut by its leader's cancellation")

// errFetchAlone is handed to a merged fetch whose partition came back
// empty (or missing) with data behind it: it goes again alone.
var errFetchAlone = errors.New("broker: partition to fetch alone")

// merger queues one broker's fetches that do not wait, beyond after
// exchanges in flight.
type merger struct {
	after int
	wait  time.Duration // the longest a fetch stays queued (Config.MergeWaitMax)
	stats *MergeStats
	// queued, when set by tests, runs after a fetch joined the queue.
	queued func()

	mu    sync.Mutex
	busy  int       // exchanges in flight (slots held, leaders included)
	queue []*member // oldest first; gone and taken ones are dropped lazily
	hints map[tp]int32
	// recent are the partitions of the broker's last fetches (a ring;
	// next is where the next goes).
	recent [8]tp
	next   int
}

// tp names a partition.
type tp struct {
	topic     string
	partition int32
}

// member is one queued fetch.
type member struct {
	r     route
	req   *FetchRequest
	hint  int32 // bytes its first batch needed last time (0: unknown)
	state atomic.Int32
	wake  chan struct{} // one send: leading, done or gone
	res   FetchResult
	err   error
}

// A member's states. queued → taken (in a leader's batch) → done; queued
// → leading (it sends the next exchange); queued or taken → gone (its
// context ended). Every move is a compare-and-swap, so exactly one of the
// leader and the cancellation settles a member.
const (
	memberQueued int32 = iota
	memberTaken
	memberLeading
	memberDone
	memberGone
)

// MergeStats counts merged fetches (for metrics).
type MergeStats struct {
	// Exchanges is merged Fetch requests sent; Parts the fetches they
	// carried (leaders included).
	Exchanges, Parts atomic.Int64
	// Alone is merged fetches fetched again alone (a partition whose
	// next batch was larger than it asked for, or beyond the answer's
	// total).
	Alone atomic.Int64
	// Dropped is answered parts released unread: their fetch had been
	// cancelled meanwhile.
	Dropped atomic.Int64
	// Queued is fetches that waited for an exchange in flight to end.
	Queued atomic.Int64
	// WaitedOut is queued fetches that stopped waiting after
	// Config.MergeWaitMax and went on a connection of their own.
	WaitedOut atomic.Int64
}

// FetchMergeStats returns the counts of merged fetches so far.
func (c *Client) FetchMergeStats() *MergeStats { return &c.mergeStats }

func newMerger(after int, wait time.Duration, stats *MergeStats) *merger {
	return &merger{after: after, wait: wait, stats: stats, hints: map[tp]int32{}}
}

// enter takes a slot for an exchange for req if one is free.
func (mg *merger) enter(req *FetchRequest) bool {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	mg.note(req)
	if mg.busy < mg.after {
		mg.busy++
		return true
	}
	return false
}

// join takes a slot (true) or queues m. A fetch whose partition is
// already queued takes a slot beyond after, at once: it could not go in
// the same request as the queued one, and waiting would serialize
// concurrent fetches of one partition (many readers of a shared grant),
// which merging cannot help. It leads the queued fetches of other
// partitions along.
//
// The scan also drops the fetches cancelled while queued: else they
// would stay until the exchange in flight ends (up to RequestTimeout and
// a half), however many came and went meanwhile; so the queue holds at
// most the fetches waiting now and those cancelled since the last join.
func (mg *merger) join(m *member) bool {
	mg.mu.Lock()
	lead := mg.busy < mg.after || mg.alone(m.req)
	kept := mg.queue[:0]
	for _, o := range mg.queue {
		if o.state.Load() != memberQueued {
			continue // gone (taken and leading ones left the queue already)
		}
		kept = append(kept, o)
		lead = lead || o.req.Partition == m.req.Partition && o.req.Topic == m.req.Topic
	}
	clear(mg.queue[len(kept):])
	mg.queue = kept
	if lead {
		mg.busy++
		mg.mu.Unlock()
		return true
	}
	mg.queue = append(mg.queue, m)
	queued := mg.queued
	mg.mu.Unlock()
	mg.stats.Queued.Add(1)
	if queued != nil {
		queued()
	}
	return false
}

// note records req's partition among the broker's recent fetches. Called
// with mu held.
func (mg *merger) note(req *FetchRequest) {
	mg.recent[mg.next%len(mg.recent)] = tp{req.Topic, req.Partition}
	mg.next++
}

// alone reports whether the broker's recent fetches were all of req's
// partition: then there is nothing to merge it with (one partition per
// broker, read by many), and queueing would only make it wait for the
// exchange in flight. Called with mu held.
func (mg *merger) alone(req *FetchRequest) bool {
	p := tp{req.Topic, req.Partition}
	for _, q := range mg.recent {
		if q != p && q != (tp{}) {
			return false
		}
	}
	return true
}

// waitQueued waits until m is woken (leading, done or gone: false), or
// until it has waited mg.wait still queued: then it stops waiting for the
// exchange in flight and takes a slot beyond after (true) — it leads,
// carrying whatever queued since. Timing decides only when a fetch stops
// waiting; what it may read is decided as for any fetch. The queue's
// lazy scans drop it (no longer queued).
func (mg *merger) waitQueued(m *member) bool {
	t := time.NewTimer(mg.wait)
	defer t.Stop()
	select {
	case <-m.wake:
		return false
	case <-t.C:
	}
	if !m.state.CompareAndSwap(memberQueued, memberLeading) {
		<-m.wake // taken, leading or gone meanwhile: its waker sends
		return false
	}
	mg.mu.Lock()
	mg.busy++
	mg.mu.Unlock()
	mg.stats.WaitedOut.Add(1)
	return true
}

// leave ends an exchange: its slot goes to the oldest queued fetch, which
// leads the next one, or is freed.
func (mg *merger) leave() {
	mg.mu.Lock()
	for len(mg.queue) > 0 {
		m := mg.queue[0]
		mg.queue[0] = nil
		mg.queue = mg.queue[1:]
		if m.state.CompareAndSwap(memberQueued, memberLeading) {
			mg.mu.Unlock()
			m.wake <- struct{}{}
			return
		}
	}
	mg.queue = nil
	mg.busy--
	mg.mu.Unlock()
}

// take moves the queued fetches of partitions other than lead's (and
// other than each other's) into a batch, up to mergeMaxParts in all, with
// their size hints, and returns lead's hint.
func (mg *merger) take(lead tp) (batch []*member, leadHint int32) {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	if len(mg.queue) == 0 {
		return nil, 0
	}
	kept := mg.queue[:0]
	for _, m := range mg.queue {
		if m.state.Load() != memberQueued {
			continue // gone
		}
		if len(batch)+1 < mergeMaxParts && !m.samePartition(lead, batch) && m.state.CompareAndSwap(memberQueued, memberTaken) {
			m.hint = mg.hints[tp{m.req.Topic, m.req.Partition}]
			batch = append(batch, m)
			continue
		}
		kept = append(kept, m)
	}
	clear(mg.queue[len(kept):])
	mg.queue = kept
	if len(batch) == 0 {
		return nil, 0
	}
	return batch, mg.hints[lead]
}

func (m *member) samePartition(lead tp, batch []*member) bool {
	if m.req.Topic == lead.topic && m.req.Partition == lead.partition {
		return true
	}
	for _, o := range batch {
		if o.req.Topic == m.req.Topic && o.req.Partition == m.req.Partition {
			return true
		}
	}
	return false
}

// hint records the bytes a partition's first batch needed.
func (mg *merger) hint(p tp, size int32) {
	mg.mu.Lock()
	if mg.hints[p] != size {
		if len(mg.hints) >= maxHints {
			clear(mg.hints) // partitions come and go; start over rather than grow
		}
		mg.hints[p] = size
	}
	mg.mu.Unlock()
}

// maxHints bounds the remembered first-batch sizes per broker.
const maxHints = 1 << 16

// fetchShort is a fetch that does not wait (MaxWait 0) of at most
// mergeMaxBytes on r: alone, leading a merged exchange, or carried by
// one.
func (c *Client) fetchShort(ctx context.Context, bp *brokerPools, r route, req *FetchRequest) (FetchResult, error) {
	mg := bp.merge
	for {
		if mg.enter(req) {
			return c.lead(ctx, bp, r, req)
		}
		m := &member{r: r, req: req, wake: make(chan struct{}, 1)} // allocated outside the lock
		if mg.join(m) {
			return c.lead(ctx, bp, r, req)
		}
		stop := afterFunc(ctx, func() {
			if m.state.CompareAndSwap(memberQueued, memberGone) || m.state.CompareAndSwap(memberTaken, memberGone) {
				m.wake <- struct{}{}
			}
		})
		if mg.waitQueued(m) {
			stop()
			return c.lead(ctx, bp, r, req)
		}
		stop()
		switch m.state.Load() {
		case memberLeading:
			if ctx.Err() != nil {
				mg.leave()
				return FetchResult{}, fmt.Errorf("fetch cancelled: %w", context.Cause(ctx))
			}
			return c.lead(ctx, bp, r, req)
		case memberDone:
			if ctx.Err() != nil {
				// Cancelled as the answer came: as a fetch of its own
				// whose interrupt ran, it answers cancelled.
				if m.err == nil {
					mg.stats.Dropped.Add(1)
				}
				m.res.Release()
				return FetchResult{}, fmt.Errorf("fetch cancelled: %w", context.Cause(ctx))
			}
			switch {
			case errors.Is(m.err, errMergeRetry):
				continue
			case errors.Is(m.err, errFetchAlone):
				return c.fetchAloneAgain(ctx, bp, r, req)
			}
			return m.res, m.err
		default: // gone
			return FetchResult{}, fmt.Errorf("fetch cancelled: %w", context.Cause(ctx))
		}
	}
}

// fetchAloneAgain fetches a partition a merged answer could not carry,
// alone (its first batch whole, as Kafka serves the first partition of a
// request), and remembers how large that batch was.
func (c *Client) fetchAloneAgain(ctx context.Context, bp *brokerPools, r route, req *FetchRequest) (FetchResult, error) {
	bp.merge.stats.Alone.Add(1)
	res, err := c.fetchAlone(ctx, bp, r, req, nil)
	if err == nil && res.firstBatch > clampBytes(req.MaxBytes, c.cfg.MaxFetchBytes) {
		bp.merge.hint(tp{req.Topic, req.Partition}, res.firstBatch)
	}
	return res, err
}

// lead sends req, holding a slot of bp's merger: with the queued fetches
// of other partitions when there are any, else alone.
func (c *Client) lead(ctx context.Context, bp *brokerPools, r route, req *FetchRequest) (FetchResult, error) {
	mg := bp.merge
	batch, hint := mg.take(tp{req.Topic, req.Partition})
	if len(batch) == 0 {
		return c.fetchAlone(ctx, bp, r, req, mg.leave)
	}
	return c.exchangeMerged(ctx, bp, &member{r: r, req: req, hint: hint}, batch)
}

// exchangeMerged sends one Fetch for lead and batch on a short-pool
// connection, under lead's context, frees the merger's slot, then hands
// each fetch of batch its part and returns lead's.
func (c *Client) exchangeMerged(ctx context.Context, bp *brokerPools, lead *member, batch []*member) (FetchResult, error) {
	mg, pool := bp.merge, bp.short
	all := append(make([]*member, 0, len(batch)+1), lead)
	all = append(all, batch...)
	mg.stats.Exchanges.Add(1)
	mg.stats.Parts.Add(int64(len(all)))

	resp, frame, err := c.mergedRoundTrip(ctx, pool, all)
	mg.leave()
	if err != nil {
		if ctx.Err() != nil {
			settle(batch[:], nil, errMergeRetry)
			return FetchResult{}, err
		}
		settle(batch, nil, err)
		return FetchResult{}, err
	}
	if resp.ErrorCode != 0 {
		putFrame(frame)
		err := kerr.ErrorForCode(resp.ErrorCode)
		settle(batch, nil, err)
		return FetchResult{}, err
	}
	shared := &sharedFrame{frame: frame}
	shared.refs.Store(1) // ours, until every part is handed out
	for i, m := range all {
		m.res, m.err = c.mergedPart(resp, m, i == 0)
		if m.err == nil {
			shared.refs.Add(1)
			m.res.shared = shared
		}
	}
	settle(batch, mg.stats, nil)
	shared.release()
	return lead.res, lead.err
}

// settle hands every fetch of batch its part (err, when set, instead):
// each still waiting is woken; one whose fetch was cancelled meanwhile
// has its part released unread (counted in stats when given).
func settle(batch []*member, stats *MergeStats, err error) {
	for _, m := range batch {
		if err != nil {
			m.res, m.err = FetchResult{}, err
		}
		if m.state.CompareAndSwap(memberTaken, memberDone) {
			m.wake <- struct{}{}
			continue
		}
		m.res.Release()
		if stats != nil && m.err == nil {
			stats.Dropped.Add(1)
		}
	}
}

// mergedRoundTrip builds the Fetch of every fetch of all (all[0] leads:
// its context cuts the exchange) and runs it on a connection of pool,
// once more on a new connection when a pooled one turns out closed.
func (c *Client) mergedRoundTrip(ctx context.Context, pool *connPool, all []*member) (*kmsg.FetchResponse, *[]byte, error) {
	conn, reused, err := pool.acquire(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	kreq := c.mergedRequest(all)
	deadline := time.Now().Add(c.cfg.RequestTimeout)
	resp, frame, err := conn.fetch(ctx, kreq, deadline, c.cfg.RequestTimeout/2)
	if err != nil && reused && ctx.Err() == nil && isTransportError(err) {
		if conn, err = pool.replace(ctx, conn); err != nil {
			return nil, nil, err
		}
		resp, frame, err = conn.fetch(ctx, kreq, deadline, c.cfg.RequestTimeout/2)
	}
	pool.release(conn, err == nil)
	return resp, frame, err
}

// mergedRequest is one Fetch (no wait, no session, read_uncommitted) of
// every fetch of all, in that order. Each partition asks for its max
// bytes, or for what its first batch needed last time when that is more.
// The request's total is MaxFetchBytes, not the sum: the first
// partition's batch comes whole however large, and counts against the
// total, which would leave the last partition short.
func (c *Client) mergedRequest(all []*member) *kmsg.FetchRequest {
	kreq := kmsg.NewPtrFetchRequest()
	kreq.MaxWaitMillis, kreq.MinBytes, kreq.IsolationLevel = 0, 1, 0
	kreq.SessionID, kreq.SessionEpoch = 0, -1
	kreq.MaxBytes = c.cfg.MaxFetchBytes
	for _, m := range all {
		ask := max(clampBytes(m.req.MaxBytes, c.cfg.MaxFetchBytes), m.hint)
		ti := -1
		for i := range kreq.Topics {
			if kreq.Topics[i].Topic == m.req.Topic && kreq.Topics[i].TopicID == m.r.topicID {
				ti = i
				break
			}
		}
		if ti < 0 {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = m.req.Topic, m.r.topicID
			kreq.Topics = append(kreq.Topics, t)
			ti = len(kreq.Topics) - 1
		}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.CurrentLeaderEpoch, p.FetchOffset, p.PartitionMaxBytes = m.req.Partition, m.r.epoch, m.req.Offset, ask
		kreq.Topics[ti].Partitions = append(kreq.Topics[ti].Partitions, p)
	}
	return kreq
}

// mergedPart shapes m's partition of a merged answer, cut to m's own max
// bytes (first batch whole). A partition missing, or empty with data
// behind it while not first in the request, is errFetchAlone.
func (c *Client) mergedPart(resp *kmsg.FetchResponse, m *member, first bool) (FetchResult, error) {
	p := findTopicPartition(resp, m.req.Topic, m.r.topicID, m.req.Partition)
	if p == nil {
		if first {
			return FetchResult{}, fmt.Errorf("fetch response without partition %d", m.req.Partition)
		}
		return FetchResult{}, errFetchAlone
	}
	if p.ErrorCode != 0 {
		return FetchResult{}, kerr.ErrorForCode(p.ErrorCode)
	}
	p.RecordBatches = cutBatches(p.RecordBatches, clampBytes(m.req.MaxBytes, c.cfg.MaxFetchBytes))
	res, err := c.shape(p, m.req)
	if err == nil && !first && res.empty(m.req.Offset) && p.HighWatermark > m.req.Offset {
		return FetchResult{}, errFetchAlone
	}
	return res, err
}

// findTopicPartition returns the answer for topic/partition: by topic id
// when the answer names topics by id (Fetch v13+), else by name.
func findTopicPartition(resp *kmsg.FetchResponse, topic string, id [16]byte, partition int32) *kmsg.FetchResponseTopicPartition {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != topic && (t.TopicID == [16]byte{} || t.TopicID != id) {
			continue
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition == partition {
				return &t.Partitions[j]
			}
		}
	}
	return nil
}

// clampBytes is a fetch's max bytes within the ceiling (<= 0: the
// ceiling).
func clampBytes(maxBytes, ceiling int32) int32 {
	if maxBytes <= 0 || maxBytes > ceiling {
		return ceiling
	}
	return maxBytes
}

// cutBatches keeps the first whole batch of in and the whole batches
// after it while they all fit in limit bytes; a trailing partial batch
// goes too (wholeBatches drops it anyway).
func cutBatches(in []byte, limit int32) []byte {
	n := 0
	for len(in)-n > batchLengthAt+4 {
		length := int64(int32(binary.BigEndian.Uint32(in[n+batchLengthAt:])))
		end := int64(n) + batchLogOverhead + length
		if length < 0 || end > int64(len(in)) || (n > 0 && end > int64(limit)) {
			break
		}
		n = int(end)
	}
	return in[:n]
}

// firstBatchSize is the size of the first batch of in (0 when in holds
// less than a batch header).
func firstBatchSize(in []byte) int32 {
	if len(in) < batchLengthAt+4 {
		return 0
	}
	length := int64(int32(binary.BigEndian.Uint32(in[batchLengthAt:])))
	return int32(min(max(length+batchLogOverhead, 0), 1<<31-1))
}

// sharedFrame is an answer buffer several results alias: it goes back to
// the pool when the last of them is released.
type sharedFrame struct {
	frame *[]byte
	refs  atomic.Int32
}

func (s *sharedFrame) release() {
	if s.refs.Add(-1) == 0 {
		putFrame(s.frame)
	}
}
