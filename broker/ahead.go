package broker

import (
	"container/list"
	"context"
	"fmt"
	"slices"
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
// Config.ReadAheadBytes) continues a partition where one of its last few
// fetches ended (a reader going on), and nothing is held for it, it asks
// Kafka for more instead, answers its own size from that (first batch
// whole, as Kafka does) and keeps the rest as a chunk; the partition's
// next small fetches, whichever client sends them, are answered from it
// while it lasts, without a Kafka exchange. A partition keeps up to
// aheadPartChunks chunks, so readers at different offsets keep theirs. A fetch anywhere else goes to Kafka as before (a random
// reader never pays for bytes it does not read).
//
// How much is read ahead grows with use, as a kernel's file read-ahead
// does: a fill asks for 4× the fetch's own size (at least
// aheadMinWindow), and a fill that continues a chunk read to its end by
// other fetches asks twice what that chunk's fill asked, up to
// ReadAheadBytes. A reader that skips to a chunk's end, or reads slower
// than aheadTTL, or one whose batches are larger than the window gets
// small fills and no copies (a fill with nothing left past its own
// answer keeps nothing): the bytes Kafka sends the gateway beyond what
// its clients read stay a small multiple of what they read.
//
// What is kept and for how long (a chunk): the whole batches of one
// answer, below the high watermark it came with (Kafka serves nothing
// above it), for at most aheadTTL, and only while the partition's topic
// id is the one it was read under (a topic deleted and made again under
// the same name is not served from the old one's chunk; a broker without
// topic ids cannot tell, and may serve the old topic's records for up to
// aheadTTL). The bytes held
// by all chunks together are at most Config.ReadAheadMaxBytes: the oldest
// chunks go first. Records are immutable once under the high watermark,
// and a chunk answers only a fetch whose cut ends before the chunk does
// (where the next batch does not fit): exactly the batches Kafka answers
// now, whatever was written since. A fetch that would take a chunk to
// its end goes to Kafka, which may have more.
// What may be older is the high watermark a hit reports (by at most
// aheadTTL; never below one a fetch of the partition reported before)
// and its log start offset, and records that
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

// aheadMinWindow is the least a partition's first fill asks for.
const aheadMinWindow = 4 << 10

// aheadMaxParts bounds the partitions whose position is remembered,
// aheadMaxChunks the chunks held (besides their bytes), and
// aheadPartChunks the chunks of one partition: readers of one partition
// at different offsets (a consumer and a replay, or several holders of
// admin grants) each keep theirs rather than take turns dropping one.
const (
	aheadMaxParts   = 16384
	aheadMaxChunks  = 4096
	aheadPartChunks = 8
)

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

// aheadCache holds a few chunks per partition at most, oldest first in a
// list (fills come in time order), so expiry and eviction take the front.
type aheadCache struct {
	bytes  int32 // Config.ReadAheadBytes
	budget int64 // Config.ReadAheadMaxBytes
	stats  *AheadStats
	now    func() time.Time // time.Now; tests move it

	mu     sync.Mutex
	parts  map[tp]*aheadPart
	chunks list.List // *aheadChunk, oldest fill first
	held   int64
}

// aheadPart is what is known of one partition.
type aheadPart struct {
	nexts   [aheadPartChunks]int64 // where its last small fetches ended (-1: none), a ring
	nextAt  int                    // where the next goes in nexts
	end     int64                  // where its last chunk ended (-1: none)
	hw      int64                  // the highest high watermark a fetch of it reported
	chunks  []*aheadChunk          // oldest first, at most aheadPartChunks
	filling bool                   // a fill is on its way: concurrent misses go plain
}

// aheadChunk is one read-ahead answer: whole batches from offset from.
type aheadChunk struct {
	topicID            [16]byte
	at                 time.Time
	owner              *aheadPart
	elem               *list.Element // in aheadCache.chunks while kept
	hits               int           // fetches it answered
	win                int32         // what its fill asked Kafka for
	shared             *sharedFrame  // the buffer; the chunk holds one ref
	size               int64         // bytes charged to the budget
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
	return &aheadCache{bytes: bytes, budget: budget, stats: stats, now: time.Now, parts: map[tp]*aheadPart{}}
}

// eligible reports a fetch small enough to be read ahead for.
func (a *aheadCache) eligible(req *FetchRequest, ceiling int32) bool {
	return a != nil && req.MaxWait <= 0 && clampBytes(req.MaxBytes, ceiling) < a.bytes
}

// aheadLook is what lookup decided for a fetch.
type aheadLook struct {
	hit  *aheadChunk // answer from it (the caller holds a ref for the answer)
	at   int         // from this batch of hit
	fill int32       // > 0: the caller fills, asking this much, and calls filled
	hw   int64       // the partition's highest high watermark so far
}

// lookup decides req (of limit bytes): a hit when one of its partition's
// chunks covers its offset and holds all Kafka would answer; a fill when
// it continues where one of the partition's last few fetches (one per
// reader, for up to aheadPartChunks readers) or a chunk ended and no fill
// is on its way; else neither (the fetch goes to Kafka as asked).
func (a *aheadCache) lookup(r route, req *FetchRequest, limit int32) aheadLook {
	key := tp{req.Topic, req.Partition}
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.parts[key]
	if p == nil {
		if len(a.parts) >= aheadMaxParts {
			a.dropPositions()
			if len(a.parts) >= aheadMaxParts {
				return aheadLook{} // every remembered partition holds a chunk
			}
		}
		p = newAheadPart()
		a.parts[key] = p
	}
	grown := int32(0) // > 0: req continues a chunk read to its end, this far
	for i := 0; i < len(p.chunks); {
		c := p.chunks[i]
		if c.topicID != r.topicID || now.Sub(c.at) >= aheadTTL {
			a.drop(c)
			continue
		}
		if at, ok := c.answers(req.Offset, limit); ok {
			c.shared.refs.Add(1)
			c.hits++
			return aheadLook{hit: c, at: at, hw: p.hw}
		}
		if req.Offset == c.end() && c.hits > 0 {
			// Read to its end by other fetches: read twice as far.
			grown = max(grown, min(2*c.win, a.bytes))
		}
		i++
	}
	if (!slices.Contains(p.nexts[:], req.Offset) && req.Offset != p.end && grown == 0) || p.filling {
		return aheadLook{}
	}
	p.filling = true
	return aheadLook{fill: max(min(4*limit, a.bytes), aheadMinWindow, grown, limit), hw: p.hw}
}

func newAheadPart() *aheadPart {
	p := &aheadPart{end: -1, hw: -1}
	for i := range p.nexts {
		p.nexts[i] = -1
	}
	return p
}

// end is the offset after c's last batch.
func (c *aheadChunk) end() int64 { return c.ends[len(c.ends)-1] }

// answers reports whether c holds offset, and from which batch,
// and everything Kafka would answer a fetch of limit bytes there now: the batches from the one
// holding offset to the chunk's end exceed limit, so the cut ends before
// the chunk does, where the next batch does not fit — exactly where
// Kafka cuts, whatever was written since. A fetch that would take the
// chunk to its end goes to Kafka, which may have more by now (and a
// newer high watermark).
func (c *aheadChunk) answers(offset int64, limit int32) (at int, ok bool) {
	if offset < c.from || offset >= c.end() {
		return 0, false
	}
	at = firstEndAfter(c.ends, offset)
	return at, len(c.batches)-int(c.starts[at]) > int(limit)
}

// advance records where a fetch of req's partition ended and the high
// watermark it reported (of a partition read ahead before only).
func (a *aheadCache) advance(req *FetchRequest, next, hw int64, small bool) {
	a.mu.Lock()
	if p := a.parts[tp{req.Topic, req.Partition}]; p != nil {
		if small && !slices.Contains(p.nexts[:], next) {
			p.nexts[p.nextAt] = next
			p.nextAt = (p.nextAt + 1) % len(p.nexts)
		}
		p.hw = max(p.hw, hw)
	}
	a.mu.Unlock()
}

// filled ends a fill: keeps c (nil when the fill failed or kept nothing)
// as one of its partition's chunks (dropping the partition's oldest
// beyond aheadPartChunks), within the budget.
func (a *aheadCache) filled(req *FetchRequest, c *aheadChunk) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.parts[tp{req.Topic, req.Partition}]
	if p != nil {
		p.filling = false
	}
	if c == nil {
		return
	}
	if p == nil || c.size > a.budget { // positions dropped meanwhile; or too large
		c.shared.release()
		return
	}
	if len(p.chunks) >= aheadPartChunks {
		a.drop(p.chunks[0])
	}
	for e := a.chunks.Front(); e != nil; e = a.chunks.Front() {
		old := e.Value.(*aheadChunk)
		expired := now.Sub(old.at) >= aheadTTL
		if !expired && a.held+c.size <= a.budget && a.chunks.Len() < aheadMaxChunks {
			break
		}
		if !expired {
			a.stats.Evicted.Add(1)
		}
		a.drop(old)
	}
	c.at, c.owner = now, p
	c.elem = a.chunks.PushBack(c)
	p.chunks, p.end = append(p.chunks, c), c.end()
	a.held += c.size
	a.stats.Held.Store(a.held)
}

// drop releases c, a kept chunk (a.mu held).
func (a *aheadCache) drop(c *aheadChunk) {
	a.chunks.Remove(c.elem)
	a.held -= c.size
	a.stats.Held.Store(a.held)
	c.shared.release()
	p := c.owner
	p.chunks = slices.DeleteFunc(p.chunks, func(k *aheadChunk) bool { return k == c })
}

// dropPositions forgets the positions of partitions that hold nothing
// (a.mu held): partitions come and go.
func (a *aheadCache) dropPositions() {
	for k, p := range a.parts {
		if len(p.chunks) == 0 && !p.filling {
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
	for e := a.chunks.Front(); e != nil; e = a.chunks.Front() {
		a.drop(e.Value.(*aheadChunk))
	}
}

// viewChunk is a chunk over res's batches (read for req on route r),
// taking res's buffer along; nil (res untouched) when res has no whole
// batch past req.Offset.
func viewChunk(r route, req *FetchRequest, res *FetchResult) *aheadChunk {
	ends, starts, n := indexBatches(res.Batches)
	if len(ends) == 0 || ends[len(ends)-1] <= req.Offset {
		return nil
	}
	c := &aheadChunk{
		topicID: r.topicID, batches: res.Batches[:n], from: req.Offset, ends: ends, starts: starts,
		highWatermark: res.HighWatermark, lso: res.LogStartOffset,
	}
	if res.shared != nil {
		c.shared = res.shared
	} else {
		c.shared = &sharedFrame{frame: res.frame}
		c.shared.refs.Store(1)
	}
	res.frame, res.shared, res.Batches = nil, nil, nil
	return c
}

// kept is a copy of c in a buffer of its own, to keep: the buffer c
// views may be a merged answer's, holding other partitions too, and the
// copy is made once per fill, not per fetch served. Charged with its
// index.
func (c *aheadChunk) kept() *aheadChunk {
	frame := getFrame(len(c.batches))
	copy(*frame, c.batches)
	k := *c
	k.batches, k.shared = *frame, &sharedFrame{frame: frame}
	k.shared.refs.Store(1)
	k.size = int64(cap(*frame)) + int64(cap(c.ends))*8 + int64(cap(c.starts))*4
	return &k
}

// indexBatches returns each whole batch's end offset and start, and the
// bytes they take: up to the first batch that does not end past the one
// before it (Kafka's never do; a chunk's batches rise, so a binary search
// finds an offset's batch).
func indexBatches(in []byte) (ends []int64, starts []int32, n int) {
	for {
		size, last, ok := nextBatch(in[n:])
		if !ok || (len(ends) > 0 && last+1 <= ends[len(ends)-1]) {
			return ends, starts, n
		}
		ends, starts = append(ends, last+1), append(starts, int32(n))
		n += size
	}
}

// serveChunk answers req from ch (whose buffer's ref the caller holds and
// hands to the result): from batch at, the one holding req.Offset, that
// batch whole and the ones after it while they fit in req's max bytes, as
// Kafka answers (cutBatches, as for a merged answer's part). The answer
// is shaped as one from Kafka would be, with the high watermark at least
// hw.
func (c *Client) serveChunk(ch *aheadChunk, at int, req *FetchRequest, hw int64) (FetchResult, error) {
	p := kmsg.NewFetchResponseTopicPartition()
	p.Partition, p.LogStartOffset = req.Partition, ch.lso
	p.HighWatermark = max(ch.highWatermark, hw)
	p.LastStableOffset = p.HighWatermark
	p.RecordBatches = cutBatches(ch.batches[ch.starts[at]:], clampBytes(req.MaxBytes, c.cfg.MaxFetchBytes))
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
	look := a.lookup(r, req, clampBytes(req.MaxBytes, c.cfg.MaxFetchBytes))
	var res FetchResult
	var err error
	switch {
	case look.hit != nil:
		a.stats.Hits.Add(1)
		res, err = c.serveChunk(look.hit, look.at, req, look.hw)
	case look.fill > 0:
		res, err = c.fill(ctx, r, req, look.fill, look.hw)
	default:
		res, err = c.fetchToBroker(ctx, r, req)
	}
	if err == nil {
		a.advance(req, res.NextOffset, res.HighWatermark, true)
	}
	return res, err
}

// fill fetches size bytes for req's partition, answers req from them and
// keeps what is left past its answer as a chunk of the partition.
func (c *Client) fill(ctx context.Context, r route, req *FetchRequest, size int32, hw int64) (out FetchResult, err error) {
	a := c.ahead
	var keep *aheadChunk
	defer func() { a.filled(req, keep) }() // also on a panic: never stuck filling
	a.stats.Fills.Add(1)
	big := *req
	big.MaxBytes, big.Raw = size, true
	res, err := c.fetchToBroker(ctx, r, &big)
	if err != nil {
		return FetchResult{}, err
	}
	view := viewChunk(r, req, &res)
	if view == nil {
		if len(res.Batches) == 0 && (req.Raw || res.HighWatermark <= req.Offset) {
			return res, nil // nothing there: the answer req would have had
		}
		// Batches, but none reaching req.Offset, or a batch a decoded
		// fetch must report as undecodable: the fetch as asked decides.
		res.Release()
		return c.fetchToBroker(ctx, r, req)
	}
	view.shared.refs.Add(1) // the answer's
	out, err = c.serveChunk(view, firstEndAfter(view.ends, req.Offset), req, hw)
	if err == nil && out.NextOffset < view.end() {
		view.win = size
		keep = view.kept()
	}
	view.shared.release()
	return out, err
}
