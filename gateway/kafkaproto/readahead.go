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
// Safety does not rest on the read-ahead: it is registered in the
// in-flight registry while it waits on Kafka (a revocation cancels it),
// and when the client's Fetch comes, every partition is admitted again
// with the capability that covers it then and decided again (Recheck)
// under a fresh in-flight registration, before a byte of it is written —
// exactly the decision a Fetch sent then would get. Memory is bounded:
// one entry per partition of a connection, each read-ahead request
// reserving its MaxBytes from kafka_read_ahead_bytes (all connections
// together) until every partition of it is used, dropped or stale
// (aheadTTL).

import (
	"context"
	"encoding/binary"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// aheadTTL drops read-ahead entries the client has not asked for since.
const aheadTTL = 10 * time.Second

type partKey struct {
	topic     string
	partition int32
}

// aheadEntry is one partition of a read-ahead request.
type aheadEntry struct {
	offset   int64
	maxBytes int32
	batch    *aheadBatch
}

// aheadBatch is one read-ahead request to Kafka (one per leader answered).
type aheadBatch struct {
	at        time.Time
	isolation int8
	cancel    context.CancelFunc
	done      chan struct{} // closed once resps is set
	resps     []*kmsg.FetchResponse

	mu       sync.Mutex
	left     int      // entries not yet used or dropped
	reserved int64    // returned to the budget when left reaches 0
	releases []func() // resps' buffers, handed back once left is 0 and resps are set
	finished bool     // resps and releases are set
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

// startReadAhead reads ahead the partitions of this answer that stopped
// below their high watermark, if the budget allows.
func (c *conn) startReadAhead(req *kmsg.FetchRequest, parts []*fetchPart) {
	if c.s.cfg.ReadAheadBytes <= 0 {
		return
	}
	var ahead []*fetchPart
	for _, p := range parts {
		if p.out.ErrorCode != 0 || c.ahead[partKey{p.topic, p.partition}] != nil {
			continue
		}
		next, ok := nextOffset(p.out.RecordBatches, p.offset)
		if !ok || next <= p.offset || next >= p.out.HighWatermark {
			continue // nothing more to read now: no long poll ahead of time
		}
		q := *p
		q.offset, q.req.Offset, q.done = next, next, nil
		ahead = append(ahead, &q)
	}
	if len(ahead) == 0 {
		return
	}
	maxBytes := int64(min(max(req.MaxBytes, 1), c.s.cfg.MaxFetchBytes))
	if c.s.aheadBudget.Add(-maxBytes) < 0 {
		c.s.aheadBudget.Add(maxBytes)
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	b := &aheadBatch{at: time.Now(), isolation: req.IsolationLevel, cancel: cancel, done: make(chan struct{}), left: len(ahead), reserved: maxBytes}
	if c.ahead == nil {
		c.ahead = map[partKey]*aheadEntry{}
	}
	for _, p := range ahead {
		c.ahead[partKey{p.topic, p.partition}] = &aheadEntry{offset: p.offset, maxBytes: p.maxBytes, batch: b}
	}
	calls := c.leaderCalls(req, ahead, b.at)
	c.s.wg.Add(1)
	go func() {
		defer c.s.wg.Done()
		defer close(b.done)
		for _, p := range ahead {
			pctx, done := c.s.gate.Track(ctx, p.claims, p.req)
			stop := context.AfterFunc(pctx, cancel) // a revocation cancels it
			defer func() { stop(); done() }()
		}
		var resps []*kmsg.FetchResponse
		var releases []func()
		for _, lc := range runCalls(ctx, c.s.gate, calls, cancel) {
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
	}()
}

// takeReadAhead answers the parts read ahead at exactly the offset and
// size asked (each under a fresh in-flight registration, decided again)
// and returns the others, to fetch as usual, and whether any record bytes
// are in the answer already.
func (c *conn) takeReadAhead(req *kmsg.FetchRequest, parts []*fetchPart) (rest []*fetchPart, data bool) {
	if len(c.ahead) == 0 {
		return parts, false
	}
	now := time.Now()
	for _, p := range parts {
		key := partKey{p.topic, p.partition}
		e := c.ahead[key]
		if e == nil {
			rest = append(rest, p)
			continue
		}
		delete(c.ahead, key)
		up := c.awaitAhead(e, p, req)
		if up == nil {
			c.dropEntry(e)
			rest = append(rest, p)
			continue
		}
		c.afterWrite = append(c.afterWrite, func() { c.dropEntry(e) }) // the answer aliases the batch's buffer until written
		_, done := c.s.gate.Track(c.ctx, p.claims, p.req)              // the decision below is revocable like any fetch's
		p.done = done
		c.answerPartition(p, up, nil, now)
		data = data || len(p.out.RecordBatches) > 0
	}
	c.expireAhead(now)
	return rest, data
}

// awaitAhead returns Kafka's answer for p from e, nil when e does not
// match what p asks or Kafka did not answer it.
func (c *conn) awaitAhead(e *aheadEntry, p *fetchPart, req *kmsg.FetchRequest) *kmsg.FetchResponseTopicPartition {
	if e.offset != p.offset || e.maxBytes != p.maxBytes || e.batch.isolation != req.IsolationLevel {
		return nil
	}
	select {
	case <-e.batch.done:
	case <-c.ctx.Done():
		return nil
	}
	for _, resp := range e.batch.resps {
		if up := findFetchPartition(resp, p); up != nil {
			return up
		}
	}
	return nil
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

// expireAhead drops entries older than aheadTTL.
func (c *conn) expireAhead(now time.Time) {
	for key, e := range c.ahead {
		if now.Sub(e.batch.at) > aheadTTL {
			delete(c.ahead, key)
			c.dropEntry(e)
		}
	}
}

// dropAllAhead drops every entry (the connection closes).
func (c *conn) dropAllAhead() {
	for key, e := range c.ahead {
		delete(c.ahead, key)
		c.dropEntry(e)
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
