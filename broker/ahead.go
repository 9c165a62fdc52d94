package broker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Read-ahead: small fetches of one partition in a row are served from
// one larger Kafka fetch.
//
// Why: an HTTP client reads one fetch at a time, and a small one (a
// 1-record fetch, a consumer that asks little per call) costs the gateway
// a Kafka write and read, their wake-ups and a broker round trip each —
// most of its CPU per fetch and most of the latency it adds (BENCHMARKS.md
// §0). A Kafka client fetches megabytes ahead; an HTTP proxy like
// kafka-pixy serves from its buffer. So: when a small fetch (below
// Config.ReadAheadBytes) continues a partition where its last fetch ended,
// and nothing is held for it, it asks Kafka for ReadAheadBytes instead,
// answers its own size from that (first batch whole, as Kafka does) and
// keeps the rest; the partition's next small fetches, whichever client
// sends them, are answered from it while it lasts, without a Kafka
// exchange. A fetch anywhere else goes to Kafka as before (a random
// reader never pays for bytes it does not read).
//
// What is kept and for how long (a chunk): the whole batches of one
// answer, below the high watermark it came with (Kafka serves nothing
// above it), for at most aheadTTL, and only while the partition's topic
// id is the one it was read under (a topic deleted and made again under
// the same name is not served from the old one's chunk). The bytes held
// by all chunks together are at most Config.ReadAheadMaxBytes: the oldest
// chunks go first. Records are immutable once under the high watermark,
// so a chunk answers exactly what Kafka would have answered for those
// offsets when it was read; what may be older is the high watermark and
// log start offset a hit reports (by at most aheadTTL), and records that
// retention or compaction removed since then (within aheadTTL; a client
// that fetched them a moment earlier had them too).
//
// Safety does not rest on the read-ahead: it sits under the gateway's
// decisions. Every fetch is admitted, registered in flight and decided
// again after this returns exactly as when Kafka answers, so a revoked
// capability reads nothing from a chunk either. Only fetches that do not
// wait (MaxWait 0: the first look of every fetch) are served from chunks;
// read_uncommitted is the only isolation the client reads.

// aheadTTL is how long a chunk is served after it was read from Kafka.
const aheadTTL = time.Second

// aheadMaxParts bounds the partitions whose position is remembered.
const aheadMaxParts = 16384

// AheadStats counts read-ahead (for metrics).
type AheadStats struct {
	// Fills is Kafka fetches made larger to read ahead; Hits is fetches
	// answered from a chunk without a Kafka exchange.
	Fills, Hits atomic.Int64
	// Evicted is chunks dropped before their time to stay within
	// Config.ReadAheadMaxBytes.
	Evicted atomic.Int64
	// Held is the bytes the chunks hold now.
	Held atomic.Int64
}

// FetchAheadStats returns the read-ahead counts so far.
func (c *Client) FetchAheadStats() *AheadStats { return &c.aheadStats }

// aheadCache holds one chunk per partition at most.
type aheadCache struct {
	bytes  int32 // Config.ReadAheadBytes
	budget int64 // Config.ReadAheadMaxBytes
	stats  *AheadStats

	mu    sync.Mutex
	parts map[tp]*aheadPart
	held  int64
}

// aheadPart is what is known of one partition.
type aheadPart struct {
	next    int64       // where its last small fetch ended
	chunk   *aheadChunk // nil: nothing held
	filling bool        // a fill is on its way: concurrent misses go plain
	end     int64       // where its last chunk ended
}

// aheadChunk is one read-ahead answer: whole batches from offset from.
type aheadChunk struct {
	topicID            [16]byte
	at                 time.Time
	shared             *sharedFrame // the answer buffer; the chunk holds one ref
	size               int64        // bytes charged to the budget
	batches            []byte
	from               int64   // the offset the fill asked for
	ends               []int64 // per batch: its last offset + 1
	starts             []int32 // per batch: where it starts in batches
	highWatermark, lso int64
}

func newAheadCache(bytes int32, budget int64, stats *AheadStats) *aheadCache {
	if bytes <= 0 {
		return nil
	}
	return &aheadCache{bytes: bytes, budget: budget, stats: stats, parts: map[tp]*aheadPart{}}
}

// eligible reports a fetch small enough to be read ahead for.
func (a *aheadCache) eligible(req *FetchRequest, ceiling int32) bool {
	return a != nil && req.MaxWait <= 0 && clampBytes(req.MaxBytes, ceiling) < a.bytes
}

// lookup answers req from its partition's chunk when one covers its
// offset (hit), or reports whether its fetch should read ahead (fill: it
// continues where the partition's last fetch or its last chunk ended,
// and no fill is on its way; the caller then owns the fill and must call filled).
func (a *aheadCache) lookup(r route, req *FetchRequest, now time.Time) (hit *aheadChunk, fill bool) {
	key := tp{req.Topic, req.Partition}
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.parts[key]
	if p == nil {
		if len(a.parts) >= aheadMaxParts {
			a.dropPositions()
		}
		p = &aheadPart{next: -1, end: -1}
		a.parts[key] = p
	}
	if c := p.chunk; c != nil {
		switch {
		case c.topicID != r.topicID || now.Sub(c.at) >= aheadTTL:
			a.drop(p)
		case req.Offset >= c.from && req.Offset < c.ends[len(c.ends)-1]:
			c.shared.refs.Add(1)
			return c, false
		}
	}
	if (req.Offset != p.next && req.Offset != p.end) || p.filling {
		return nil, false
	}
	p.filling = true
	return nil, true
}

// advance records where a fetch of req's partition ended.
func (a *aheadCache) advance(req *FetchRequest, next int64) {
	a.mu.Lock()
	if p := a.parts[tp{req.Topic, req.Partition}]; p != nil {
		p.next = next
	}
	a.mu.Unlock()
}

// filled ends a fill: keeps c (nil when the fill failed or read nothing)
// as its partition's chunk, within the budget.
func (a *aheadCache) filled(req *FetchRequest, c *aheadChunk) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.parts[tp{req.Topic, req.Partition}]
	if p == nil { // positions were dropped meanwhile
		p = &aheadPart{next: -1}
		a.parts[tp{req.Topic, req.Partition}] = p
	}
	p.filling = false
	if c == nil {
		return
	}
	if c.size > a.budget {
		c.shared.release()
		return
	}
	a.drop(p)
	for a.held+c.size > a.budget && a.evictOldest() {
	}
	p.chunk, p.end = c, c.ends[len(c.ends)-1]
	a.held += c.size
	a.stats.Held.Store(a.held)
}

// drop releases p's chunk, if any (a.mu held).
func (a *aheadCache) drop(p *aheadPart) {
	if p.chunk == nil {
		return
	}
	a.held -= p.chunk.size
	a.stats.Held.Store(a.held)
	p.chunk.shared.release()
	p.chunk = nil
}

// evictOldest drops the oldest chunk (a.mu held); false when none is left.
// A linear walk: it runs only when the budget is full, over at most
// budget / ReadAheadBytes chunks.
func (a *aheadCache) evictOldest() bool {
	var oldest *aheadPart
	for _, p := range a.parts {
		if p.chunk != nil && (oldest == nil || p.chunk.at.Before(oldest.chunk.at)) {
			oldest = p
		}
	}
	if oldest == nil {
		return false
	}
	a.drop(oldest)
	a.stats.Evicted.Add(1)
	return true
}

// dropPositions forgets the positions of partitions that hold nothing
// (a.mu held): partitions come and go.
func (a *aheadCache) dropPositions() {
	for k, p := range a.parts {
		if p.chunk == nil && !p.filling {
			delete(a.parts, k)
		}
	}
}

// close releases every chunk.
func (a *aheadCache) close() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.parts {
		a.drop(p)
	}
}

// newChunk copies res's batches (read for req on route r) into a chunk
// of its own, or returns nil when res has no whole batch past req.Offset. A copy, not
// res's buffer: a merged answer's buffer holds other partitions too, and
// the copy is made once per fill, not per fetch served.
func newChunk(r route, req *FetchRequest, res *FetchResult, now time.Time) *aheadChunk {
	ends, starts := indexBatches(res.Batches)
	if len(ends) == 0 || ends[len(ends)-1] <= req.Offset {
		return nil
	}
	frame := getFrame(len(res.Batches))
	copy(*frame, res.Batches)
	c := &aheadChunk{
		topicID: r.topicID, at: now, shared: &sharedFrame{frame: frame}, size: int64(cap(*frame)),
		batches: *frame, from: req.Offset, ends: ends, starts: starts,
		highWatermark: res.HighWatermark, lso: res.LogStartOffset,
	}
	c.shared.refs.Store(1)
	return c
}

// indexBatches returns each whole batch's end offset and start.
func indexBatches(in []byte) (ends []int64, starts []int32) {
	for n := 0; ; {
		size, last, ok := nextBatch(in[n:])
		if !ok {
			return ends, starts
		}
		ends, starts = append(ends, last+1), append(starts, int32(n))
		n += size
	}
}

// serveChunk answers req from ch (whose buffer's ref the caller holds and
// hands to the result): from the batch holding req.Offset, that batch
// whole and the ones after it while they fit in req's max bytes, as Kafka
// answers. The answer is shaped as one from Kafka would be.
func (c *Client) serveChunk(ch *aheadChunk, req *FetchRequest) (FetchResult, error) {
	i := firstEndAfter(ch.ends, req.Offset)
	limit := int(clampBytes(req.MaxBytes, c.cfg.MaxFetchBytes))
	endOf := func(j int) int {
		if j+1 < len(ch.starts) {
			return int(ch.starts[j+1])
		}
		return len(ch.batches)
	}
	start, end := int(ch.starts[i]), endOf(i)
	for j := i + 1; j < len(ch.starts) && endOf(j)-start <= limit; j++ {
		end = endOf(j)
	}
	p := kmsg.NewFetchResponseTopicPartition()
	p.Partition, p.HighWatermark, p.LastStableOffset, p.LogStartOffset = req.Partition, ch.highWatermark, ch.highWatermark, ch.lso
	p.RecordBatches = ch.batches[start:end]
	res, err := c.shape(&p, req)
	if err != nil {
		ch.shared.release()
		return FetchResult{}, err
	}
	res.shared = ch.shared
	return res, nil
}

// firstEndAfter is the first batch whose end is past offset (ends rise).
func firstEndAfter(ends []int64, offset int64) int {
	lo, hi := 0, len(ends)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ends[m] <= offset {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// fetchAhead is fetchOnce for a fetch eligible for read-ahead: answered
// from a chunk, or fetched larger to fill one, or fetched as asked.
func (c *Client) fetchAhead(ctx context.Context, r route, req *FetchRequest) (FetchResult, error) {
	if ctx.Err() != nil { // as a fetch to Kafka: cancelled returns nothing
		return FetchResult{}, fmt.Errorf("fetch cancelled: %w", context.Cause(ctx))
	}
	a := c.ahead
	ch, fill := a.lookup(r, req, time.Now())
	var res FetchResult
	var err error
	switch {
	case ch != nil:
		a.stats.Hits.Add(1)
		res, err = c.serveChunk(ch, req)
	case !fill:
		res, err = c.fetchToBroker(ctx, r, req)
	default:
		res, err = c.fill(ctx, r, req)
	}
	if err == nil {
		a.advance(req, res.NextOffset)
	}
	return res, err
}

// fill fetches ReadAheadBytes for req's partition, keeps them as its
// chunk and answers req from them.
func (c *Client) fill(ctx context.Context, r route, req *FetchRequest) (FetchResult, error) {
	a := c.ahead
	a.stats.Fills.Add(1)
	big := *req
	big.MaxBytes, big.Raw = a.bytes, true
	res, err := c.fetchToBroker(ctx, r, &big)
	if err != nil {
		a.filled(req, nil)
		return FetchResult{}, err
	}
	ch := newChunk(r, req, &res, time.Now())
	if ch == nil {
		a.filled(req, nil)
		if len(res.Batches) == 0 { // nothing there: the answer req would have had
			return res, nil
		}
		// Batches, but none reaching req.Offset (not seen from Kafka):
		// the fetch as asked decides.
		res.Release()
		return c.fetchToBroker(ctx, r, req)
	}
	res.Release()
	ch.shared.refs.Add(1) // the answer's
	out, err := c.serveChunk(ch, req)
	a.filled(req, ch)
	return out, err
}
