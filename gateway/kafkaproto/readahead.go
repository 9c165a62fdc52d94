package kafkaproto

// Read-ahead: a Kafka client sends one Fetch per broker at a time and
// waits for its answer, so through the listener every fetch would pay two
// round trips in a row (client → gateway → Kafka). After answering a
// Fetch, the connection fetches from Kafka at once, for every partition
// whose answer ended below the high watermark (more data is there), the
// batches at the offset the client will ask for next — while the client
// processes the answer. A later Fetch asking a partition at exactly that
// offset (and size) is answered from it; the partitions it has nothing
// for are fetched as usual, in the same answer.
//
// The read-ahead is chained, aheadDepth deep: once a read-ahead's answer
// is in and still ends below the high watermark, the next one starts
// from where it ends, without waiting for the client's Fetch — so the
// answer the client asks for next is in the gateway already, not half
// way from Kafka, even when Kafka answers about as slowly as the client
// consumes (BENCHMARKS.md §8: a client waited 0.2–0.3 ms per Fetch for
// a single read-ahead to arrive).
//
// Safety does not rest on the read-ahead: it is registered in the
// in-flight registry while it waits on Kafka (a revocation cancels it), a
// chained one starts only when its capability is decided again (Recheck)
// and covers no byte rate, and when the client's Fetch comes, every
// partition is admitted again with the capability that covers it then
// and decided again (Recheck) under a fresh in-flight registration,
// before a byte of it is written — exactly the decision a Fetch sent then
// would get. Memory is bounded: at most aheadDepth entries per partition
// of a connection, each read-ahead request reserving the bytes it may
// carry from kafka_read_ahead_bytes (all connections together) until
// every partition of it is used, dropped or stale (aheadTTL).

import (
	"context"
	"encoding/binary"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// aheadTTL drops read-ahead entries the client has not asked for since.
const aheadTTL = 10 * time.Second

// aheadDepth is how many read-aheads a partition may have queued: the one
// the client's next Fetch takes, and the one after it on its way.
const aheadDepth = 2

type partKey struct {
	topic     string
	partition int32
}

// aheadEntry is one partition of a read-ahead request.
type aheadEntry struct {
	part  fetchPart // as admitted for the read-ahead (its offset is the entry's)
	batch *aheadBatch
}

// aheadBatch is one read-ahead request to Kafka (one call per leader).
type aheadBatch struct {
	at      time.Time
	shape   aheadShape
	cancel  context.CancelFunc
	entries []*aheadEntry
	done    chan struct{} // closed once resps is set
	resps   []*kmsg.FetchResponse

	mu       sync.Mutex
	left     int      // entries not yet used or dropped
	reserved int64    // returned to the budget when left reaches 0
	releases []func() // resps' buffers, handed back once left is 0 and resps are set
	finished bool     // resps and releases are set
}

// aheadShape is what a read-ahead keeps of the client's Fetch: a later
// Fetch of another isolation level does not match it.
type aheadShape struct {
	minBytes, maxBytes int32
	isolation          int8
}

// answered returns Kafka's answer to e (nil when it failed or is not in),
// once e's batch is finished.
func (e *aheadEntry) answered() *kmsg.FetchResponseTopicPartition {
	for _, resp := range e.batch.resps {
		if up := findFetchPartition(resp, &e.part); up != nil {
			return up
		}
	}
	return nil
}

func (b *aheadBatch) isFinished() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// release hands back the batch's buffers once it is finished and no entry
// is left (whichever comes last calls it); b.mu held.
func (b *aheadBatch) releaseLocked() {
	if !b.finished || b.left > 0 {
		return
	}
	for _, f := range b.releases {
		f()
	}
	b.releases = nil
}

// startReadAhead reads ahead, after an answer, the partitions of it that
// stopped below their high watermark (from the answer when nothing is
// queued for them; from the last queued read-ahead when it is in and the
// queue is not full), if the budget allows.
func (c *conn) startReadAhead(req *kmsg.FetchRequest, parts []*fetchPart) {
	if c.s.cfg.ReadAheadBytes <= 0 || len(parts) == 0 {
		return
	}
	c.aheadMu.Lock()
	defer c.aheadMu.Unlock()
	if c.aheadClosed {
		return
	}
	var ahead []*fetchPart
	now := time.Now()
	for _, p := range parts {
		if p.out.ErrorCode != 0 {
			continue
		}
		if q := c.ahead[partKey{p.topic, p.partition}]; len(q) > 0 {
			if next := c.chainable(q[len(q)-1], len(q), now); next != nil {
				ahead = append(ahead, next)
			}
			continue
		}
		next, ok := nextOffset(p.out.RecordBatches, p.offset)
		if !ok || next <= p.offset || next >= p.out.HighWatermark {
			continue // nothing more to read now: no long poll ahead of time
		}
		q := *p
		q.offset, q.req.Offset, q.done, q.out = next, next, nil, nil
		ahead = append(ahead, &q)
	}
	c.launchLocked(ahead, aheadShape{minBytes: req.MinBytes, maxBytes: req.MaxBytes, isolation: req.IsolationLevel})
}

// chainable returns the read-ahead that follows e, the last of a queue
// of n entries, or nil: the queue is full, e is not in yet, its answer
// has no more data below the high watermark, or its capability carries a
// byte rate or no longer decides yes. c.aheadMu held.
func (c *conn) chainable(e *aheadEntry, n int, now time.Time) *fetchPart {
	if n >= aheadDepth || !e.batch.isFinished() || e.part.allowance >= 0 {
		return nil
	}
	up := e.answered()
	if up == nil || up.ErrorCode != 0 {
		return nil
	}
	next, ok := nextOffset(up.RecordBatches, e.part.offset)
	if !ok || next <= e.part.offset || next >= up.HighWatermark {
		return nil
	}
	if c.s.gate.Recheck(e.part.claims, e.part.req, now) != "" {
		return nil
	}
	q := e.part
	q.offset, q.req.Offset = next, next
	return &q
}

// launchLocked starts one read-ahead request for parts (their queues
// take an entry each). c.aheadMu held.
func (c *conn) launchLocked(parts []*fetchPart, shape aheadShape) {
	if len(parts) == 0 {
		return
	}
	maxBytes := int64(min(max(shape.maxBytes, 1), c.s.cfg.MaxFetchBytes))
	var sum int64
	for _, p := range parts {
		sum += int64(max(p.maxBytes, 0))
	}
	reserve := max(min(maxBytes, sum), 1) // what Kafka may answer at most
	if c.s.aheadBudget.Add(-reserve) < 0 {
		c.s.aheadBudget.Add(reserve)
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	b := &aheadBatch{at: time.Now(), shape: shape, cancel: cancel, done: make(chan struct{}), left: len(parts), reserved: reserve}
	if c.ahead == nil {
		c.ahead = map[partKey][]*aheadEntry{}
	}
	for _, p := range parts {
		e := &aheadEntry{part: *p, batch: b}
		b.entries = append(b.entries, e)
		key := partKey{p.topic, p.partition}
		c.ahead[key] = append(c.ahead[key], e)
	}
	// No long poll: every partition read ahead has data below its high
	// watermark.
	calls := c.s.leaderCalls(parts, 0, shape.minBytes, int32(maxBytes), shape.isolation)
	c.s.wg.Add(1)
	go func() {
		defer c.s.wg.Done()
		c.readAhead(ctx, b, calls)
		c.chain(b)
	}()
}

// readAhead sends b's calls, each partition registered in flight (a
// revocation cancels them), and files the answers in b.
func (c *conn) readAhead(ctx context.Context, b *aheadBatch, calls []*leaderCall) {
	defer close(b.done)
	for _, e := range b.entries {
		pctx, done, code := c.s.gate.Track(ctx, e.part.claims, e.part.req, true)
		if code != "" {
			b.cancel() // over an in-flight cap: no read-ahead; its fetches go to Kafka themselves
			continue
		}
		stop := context.AfterFunc(pctx, b.cancel) // a revocation cancels it
		defer func() { stop(); done() }()
	}
	var resps []*kmsg.FetchResponse
	var releases []func()
	for _, lc := range runCalls(ctx, c.s.gate, calls, b.cancel) {
		if lc.err == nil {
			resps = append(resps, lc.resp)
		}
		if lc.release != nil {
			releases = append(releases, lc.release)
		}
	}
	b.mu.Lock()
	b.resps, b.releases, b.finished = resps, releases, true
	b.releaseLocked()
	b.mu.Unlock()
}

// chain starts the read-ahead after b's, for the partitions whose queue
// still ends with b's entry and has room.
func (c *conn) chain(b *aheadBatch) {
	c.aheadMu.Lock()
	defer c.aheadMu.Unlock()
	if c.aheadClosed {
		return
	}
	var next []*fetchPart
	now := time.Now()
	for _, e := range b.entries {
		q := c.ahead[partKey{e.part.topic, e.part.partition}]
		if len(q) == 0 || q[len(q)-1] != e {
			continue // used, dropped, or already followed
		}
		if p := c.chainable(e, len(q), now); p != nil {
			next = append(next, p)
		}
	}
	c.launchLocked(next, b.shape)
}

// takeReadAhead answers the parts read ahead at exactly the offset and
// size asked (each under a fresh in-flight registration, decided again)
// and returns the others, to fetch as usual, and whether any record bytes
// are in the answer already.
func (c *conn) takeReadAhead(req *kmsg.FetchRequest, parts []*fetchPart) (rest []*fetchPart, data bool) {
	type taken struct {
		p *fetchPart
		e *aheadEntry
	}
	var got []taken
	now := time.Now()
	c.aheadMu.Lock()
	if len(c.ahead) == 0 {
		c.aheadMu.Unlock()
		return parts, false
	}
	for _, p := range parts {
		key := partKey{p.topic, p.partition}
		q := c.ahead[key]
		switch {
		case len(q) == 0:
			rest = append(rest, p)
		case !q[0].matches(p, req):
			c.dropQueueLocked(key) // the client went elsewhere: every entry is stale
			rest = append(rest, p)
		default:
			got = append(got, taken{p, q[0]})
			if len(q) == 1 {
				delete(c.ahead, key)
			} else {
				q[0] = nil
				c.ahead[key] = q[1:]
			}
		}
	}
	c.expireAheadLocked(now)
	c.aheadMu.Unlock()
	for _, t := range got {
		p, e := t.p, t.e
		up := c.awaitAhead(e)
		if up == nil {
			c.dropEntry(e)
			rest = append(rest, p)
			continue
		}
		c.afterWrite = append(c.afterWrite, func() { c.dropEntry(e) }) // the answer aliases the batch's buffer until written
		_, done, _ := c.s.gate.Track(c.ctx, p.claims, p.req, false)    // the decision below is revocable like any fetch's
		p.done = done
		c.answerPartition(p, up, nil, now)
		data = data || len(p.out.RecordBatches) > 0
	}
	return rest, data
}

// matches reports whether e is what p asks, at exactly its offset and
// size, in a Fetch of the same isolation level.
func (e *aheadEntry) matches(p *fetchPart, req *kmsg.FetchRequest) bool {
	return e.part.offset == p.offset && e.part.maxBytes == p.maxBytes && e.batch.shape.isolation == req.IsolationLevel
}

// awaitAhead returns Kafka's answer for e once it is in, nil when Kafka
// did not answer it (or the connection closes first).
func (c *conn) awaitAhead(e *aheadEntry) *kmsg.FetchResponseTopicPartition {
	select {
	case <-e.batch.done:
	case <-c.ctx.Done():
		return nil
	}
	return e.answered()
}

// dropEntry lets go of one entry; its batch's reservation returns with
// the last one.
func (c *conn) dropEntry(e *aheadEntry) {
	b := e.batch
	b.mu.Lock()
	b.left--
	last := b.left == 0
	b.releaseLocked()
	b.mu.Unlock()
	if last {
		b.cancel()
		c.s.aheadBudget.Add(b.reserved)
	}
}

// dropQueueLocked drops every entry queued for key. c.aheadMu held.
func (c *conn) dropQueueLocked(key partKey) {
	for _, e := range c.ahead[key] {
		c.dropEntry(e)
	}
	delete(c.ahead, key)
}

// expireAheadLocked drops the queues whose first entry is older than
// aheadTTL. c.aheadMu held.
func (c *conn) expireAheadLocked(now time.Time) {
	for key, q := range c.ahead {
		if now.Sub(q[0].batch.at) > aheadTTL {
			c.dropQueueLocked(key)
		}
	}
}

// dropAllAhead drops every entry and starts no more (the connection
// closes).
func (c *conn) dropAllAhead() {
	c.aheadMu.Lock()
	defer c.aheadMu.Unlock()
	c.aheadClosed = true
	for key := range c.ahead {
		c.dropQueueLocked(key)
	}
}

// nextOffset is the offset a client fetches after decoding batches read
// from offset: after the last whole v2 batch (base offset + last offset
// delta + 1). ok is false for batches of the old message formats.
func nextOffset(batches []byte, offset int64) (int64, bool) {
	next := offset
	for len(batches) >= 61 { // a v2 batch header
		base := int64(binary.BigEndian.Uint64(batches))
		size := 12 + int(int32(binary.BigEndian.Uint32(batches[8:])))
		if size < 61 || size > len(batches) {
			break // the last batch was cut at MaxBytes: the client refetches it
		}
		if batches[16] != 2 {
			return 0, false
		}
		next = max(next, base+int64(int32(binary.BigEndian.Uint32(batches[23:])))+1)
		batches = batches[size:]
	}
	return next, true
}
