package gateway

import (
	"encoding/base64"
	"encoding/binary"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/ocap"
)

// budgetKey is the bucket a capability's bytes count against at now: the
// operator override that sets its rate (one budget per override: every
// capability its selector matches, children included, shares it), else
// the root of its chain (chn[0], or its jti: a capability and every child
// attenuated from it share one budget). So minting ten children with the
// same limit buys no more than the limit.
func budgetKey(v *authz.View, c *ocap.Claims, now time.Time) string {
	if id := v.RateOverride(c, now); id != "" {
		return "qos/" + id
	}
	return "root/" + c.Root()
}

// rateLimiter enforces byte rates with token buckets keyed by budget
// (budgetKey: the root of a capability's chain, or the override setting
// its rate): a bucket holds up to one second of bytes, and a request is
// admitted while the bucket is positive (its max_bytes clamped to what
// the bucket holds). A fetch's answer is charged when it is ready, in one
// step under the lock (spendRecords, spendBatches): the bucket is read,
// the answer cut to it and the bytes taken at once, so fetches racing for
// one budget cannot spend the same bytes, and a budget overshoots by at
// most the last record (JSON) or record batch (raw) that crossed zero,
// repaid as debt before the next is served; a refusal's Retry-After never
// reaches past the capability's lease (refuseRate). Other bytes (produce, the Kafka
// listener) are taken afterwards (take). The rate comes from the
// capability's qos or a live override and may change between requests.
// At most max buckets are kept; a full bucket carries no state and is the
// first to go.
type rateLimiter struct {
	max int

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	rate   float64 // bytes per second
	tokens float64 // bytes available; negative is debt
	last   int64   // unix ns of the last refill
}

func newRateLimiter(maxEntries int) *rateLimiter {
	return &rateLimiter{max: maxEntries, buckets: map[string]*bucket{}}
}

// admit refills jti's bucket at rate (bytes/s) and returns the bytes the
// request may use now, or, when the bucket is empty, how long to wait.
func (l *rateLimiter) admit(jti string, rate int64, now time.Time) (allowance int64, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refillLocked(jti, rate, now)
	if b.tokens > 0 {
		return int64(b.tokens), 0
	}
	return 0, b.wait()
}

// spendRecords takes a JSON answer's bytes from key's bucket at now: it
// keeps the first records whose encoded size fits what the bucket holds
// (at least one when it holds anything) and charges their size, all
// under the lock. keep is how many records to send; wait is set (keep 0)
// when the bucket holds nothing.
func (l *rateLimiter) spendRecords(key string, rate int64, recs []*kgo.Record, now time.Time) (keep int, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refillLocked(key, rate, now)
	if b.tokens <= 0 && len(recs) > 0 {
		return 0, b.wait()
	}
	spent := jsonAnswerOverhead
	for keep < len(recs) {
		size := jsonRecordSize(recs[keep])
		if keep > 0 && float64(spent+size) > b.tokens {
			break
		}
		spent += size
		keep++
	}
	b.tokens -= float64(spent)
	return keep, 0
}

// spendBatches takes a raw answer's bytes from key's bucket at now: it
// keeps the leading record batches that fit what the bucket holds (at
// least the first, as Kafka serves the first batch whole) and charges
// their size, all under the lock. keep is how many bytes of batches to
// send and next, when the answer was cut (keep < len(batches)), the
// offset the next fetch starts from; wait is set (keep 0) when the
// bucket holds nothing.
func (l *rateLimiter) spendBatches(key string, rate int64, batches []byte, now time.Time) (keep int, next int64, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refillLocked(key, rate, now)
	if b.tokens <= 0 && len(batches) > 0 {
		return 0, 0, b.wait()
	}
	keep, next = batchesWithin(batches, b.tokens)
	b.tokens -= float64(keep)
	return keep, next, 0
}

// batchesWithin returns how many leading bytes of batches (whole record
// batches, as the broker hands them over) fit in budget bytes, at least
// the first batch, and the offset a fetch continues from after them: the
// base offset of the first batch left out. Only record batches (magic 2)
// are left out, because their base offset is their first record's; the
// old message sets (magic 0 and 1) name their last offset instead, so an
// answer reaching them is kept whole. Only headers are read.
func batchesWithin(batches []byte, budget float64) (keep int, next int64) {
	const lengthAt, magicAt, logOverhead = 8, 16, 12 // baseOffset int64 | batchLength int32 | epoch int32 | magic int8
	for keep < len(batches) {
		b := batches[keep:]
		if len(b) <= magicAt {
			break
		}
		end := logOverhead + int(int32(binary.BigEndian.Uint32(b[lengthAt:])))
		if keep > 0 && float64(keep+end) > budget {
			if b[magicAt] != 2 {
				break
			}
			return keep, int64(binary.BigEndian.Uint64(b))
		}
		if end <= logOverhead || end > len(b) {
			break
		}
		keep += end
	}
	return len(batches), 0
}

// wait is how long until the bucket is positive again.
func (b *bucket) wait() time.Duration {
	return time.Duration(-b.tokens/b.rate*float64(time.Second)) + time.Millisecond
}

// jsonAnswerOverhead and jsonRecordSize bound the JSON encoding of an
// answer (recordjson.go): the enclosing object, and per record its keys,
// numbers, base64 key and value, and headers.
const jsonAnswerOverhead = 64

func jsonRecordSize(r *kgo.Record) int {
	n := 96 + base64.StdEncoding.EncodedLen(len(r.Key)) + base64.StdEncoding.EncodedLen(len(r.Value))
	for _, h := range r.Headers {
		n += 24 + len(h.Key) + base64.StdEncoding.EncodedLen(len(h.Value))
	}
	return n
}

// take charges n bytes served to key's bucket.
func (l *rateLimiter) take(jti string, rate int64, n int, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refillLocked(jti, rate, now)
	b.tokens -= float64(n)
}

func (l *rateLimiter) refillLocked(jti string, rate int64, now time.Time) *bucket {
	r, t := float64(rate), now.UnixNano()
	b, ok := l.buckets[jti]
	if !ok {
		if len(l.buckets) >= l.max {
			l.evictLocked(t)
		}
		b = &bucket{rate: r, tokens: r, last: t}
		l.buckets[jti] = b
		return b
	}
	if t > b.last {
		b.tokens += b.rate * float64(t-b.last) / float64(time.Second)
		b.last = t
	}
	b.rate = r
	b.tokens = min(b.tokens, r)
	return b
}

// evictLocked drops the buckets that have refilled completely; if none
// has, an eighth of them (map order: random).
func (l *rateLimiter) evictLocked(now int64) {
	for jti, b := range l.buckets {
		if b.tokens+b.rate*float64(now-b.last)/float64(time.Second) >= b.rate {
			delete(l.buckets, jti)
		}
	}
	if len(l.buckets) < l.max {
		return
	}
	drop := 1 + l.max/8
	for jti := range l.buckets {
		if drop <= 0 {
			break
		}
		delete(l.buckets, jti)
		drop--
	}
}

// len is the number of buckets.
func (l *rateLimiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// spend charges a fetch's answer to its budget before it is written
// (rateLimiter.spendRecords, spendBatches): a JSON answer is cut to what
// the budget holds, and an answer to an empty budget is refused 429 (the
// records stay in Kafka; the client fetches them again later).
func (f *fetchCall) spend(res *broker.FetchResult, now time.Time) api.Code {
	if f.qos.MaxBytesPerSec <= 0 {
		return ""
	}
	key, rate := budgetKey(f.g.view, f.claims, f.start), f.qos.MaxBytesPerSec
	var wait time.Duration
	if f.raw {
		var keep int
		var next int64
		if keep, next, wait = f.g.limiter.spendBatches(key, rate, res.Batches, now); wait == 0 {
			if keep < len(res.Batches) {
				res.Batches, res.NextOffset = res.Batches[:keep], next
			}
			f.charged = keep
		}
	} else {
		recs, next := cutAtRangeEnd(f.claims, res.Records, res.NextOffset)
		var keep int
		if keep, wait = f.g.limiter.spendRecords(key, rate, recs, now); wait == 0 {
			if keep < len(recs) {
				next = recs[keep].Offset
			}
			res.Records, res.NextOffset = recs[:keep], next
			f.charged = jsonAnswerOverhead
			for _, r := range res.Records {
				f.charged += jsonRecordSize(r)
			}
		}
	}
	if wait > 0 {
		return refuseRate(f.ctx, f.claims, wait, now)
	}
	return ""
}

// leaseWait caps a rate limit's wait at what is left of the capability's
// lease (never below zero): beyond its lease the holder needs a renewed
// capability anyway, so it is never told to sleep past it.
func leaseWait(c *ocap.Claims, wait time.Duration, now time.Time) time.Duration {
	left := time.Unix(int64(c.ExpiresAt), 0).Sub(now)
	return max(min(wait, left), 0)
}

// refuseRate answers 429 rate_limited for a capability whose budget is
// spent, with Retry-After and retry_after_ms no later than its lease's
// end: Retry-After counts whole seconds, rounded up from the wait but
// down to the lease's end (0 when less than a second of it is left).
func refuseRate(ctx *fasthttp.RequestCtx, c *ocap.Claims, wait time.Duration, now time.Time) api.Code {
	wait = leaseWait(c, wait, now)
	secs := max(int64((wait+time.Second-1)/time.Second), 1)
	secs = min(secs, (int64(c.ExpiresAt)*int64(time.Second)-now.UnixNano())/int64(time.Second))
	ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, strconv.FormatInt(max(secs, 0), 10))
	writeError(ctx, api.CodeRateLimited, "byte rate of this capability exceeded", map[string]any{"retry_after_ms": wait.Milliseconds()})
	return api.CodeRateLimited
}
