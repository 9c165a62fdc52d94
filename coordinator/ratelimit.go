package coordinator

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"

	"github.com/capgate/capgate/api"
)

// keyedLimiter rate-limits requests per key (a credential's id for joins,
// a chain root for attenuations) with golang.org/x/time/rate token
// buckets. It keeps at most max keys: when full it drops the buckets that
// have refilled (they carry no state), and if none has, an eighth of the
// table (map order: random) — a dropped key starts again with a full
// burst, which is the most a flood of distinct keys can win. Safe for
// concurrent use.
type keyedLimiter struct {
	limit rate.Limit
	burst int
	max   int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func newKeyedLimiter(perSecond float64, burst, maxKeys int) *keyedLimiter {
	return &keyedLimiter{limit: rate.Limit(perSecond), burst: burst, max: maxKeys, buckets: map[string]*rate.Limiter{}}
}

// allow takes one token of key's bucket at now; when there is none it
// returns how long until there is.
func (l *keyedLimiter) allow(key string, now time.Time) (ok bool, wait time.Duration) {
	return l.allowN(key, now, 1)
}

// allowN is allow for n tokens (cut to the burst, the most a bucket
// holds).
func (l *keyedLimiter) allowN(key string, now time.Time, n int) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.bucketLocked(key, now).ReserveN(now, min(n, l.burst))
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// reserve takes one token of key's bucket at now, or reserves the next
// one when it comes within maxWait: delay is how long until it is the
// caller's (0: at once; cancel gives it back). When it comes later,
// nothing is taken and ok is false; delay then says when it would come.
func (l *keyedLimiter) reserve(key string, now time.Time, maxWait time.Duration) (delay time.Duration, cancel func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.bucketLocked(key, now).ReserveN(now, 1)
	if d := r.DelayFrom(now); d > maxWait {
		r.CancelAt(now)
		return d, nil, false
	}
	return r.DelayFrom(now), func() { r.CancelAt(now) }, true
}

// reserveUpTo reserves up to n tokens of key's bucket at now, one after
// another: the first when it comes within maxWait (else nothing is
// taken and k is 0), each next one only when it comes by `by` (and
// within maxWait). It says how many it reserved and when the last of
// them is the caller's. What a held heartbeat pays for its news
// (loopShare.reserveMints): the tokens that come while it is held
// anyway, not one a heartbeat.
func (l *keyedLimiter) reserveUpTo(key string, now time.Time, n int, maxWait time.Duration, by time.Time) (k int, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketLocked(key, now)
	for ; k < n; k++ {
		r := b.ReserveN(now, 1)
		d := r.DelayFrom(now)
		if d > maxWait || k > 0 && now.Add(d).After(by) {
			r.CancelAt(now) // the last reservation: all of it comes back
			break
		}
		at = now.Add(d)
	}
	return k, at
}

// charge takes n more tokens of key's bucket at now without waiting for
// them: the bucket goes into debt (n is cut to the burst, the most a
// bucket may owe), which key's next reservations wait for.
func (l *keyedLimiter) charge(key string, now time.Time, n int) {
	if n <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bucketLocked(key, now).ReserveN(now, min(n, l.burst))
}

// takeUpTo takes up to n tokens of key's bucket at now, as many as it
// holds and debtMax more (the bucket then owes at most debtMax), and
// says how many it took: 0 when it owes debtMax already. A mint's
// allowance (loopShare.mintAllowance): what is not taken is not done now.
func (l *keyedLimiter) takeUpTo(key string, now time.Time, n, debtMax int) int {
	if n <= 0 {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketLocked(key, now)
	k := min(n, int(math.Floor(b.TokensAt(now)))+debtMax)
	for left := k; left > 0; { // ReserveN takes at most the burst at once
		step := min(left, l.burst)
		b.ReserveN(now, step)
		left -= step
	}
	return max(k, 0)
}

// owed is how long until key's bucket is out of debt at now (0: it owes
// nothing). It makes no bucket: a key without one owes nothing.
func (l *keyedLimiter) owed(key string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		return 0
	}
	tokens := b.TokensAt(now)
	if tokens >= 0 || l.limit <= 0 {
		return 0
	}
	return time.Duration(-tokens / float64(l.limit) * float64(time.Second))
}

// bucketLocked is key's bucket, made (full) when key has none.
func (l *keyedLimiter) bucketLocked(key string, now time.Time) *rate.Limiter {
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= l.max {
			l.evictLocked(now)
		}
		b = rate.NewLimiter(l.limit, l.burst)
		l.buckets[key] = b
	}
	return b
}

func (l *keyedLimiter) evictLocked(now time.Time) {
	for key, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, key)
		}
	}
	drop := len(l.buckets) - l.max + 1 + l.max/8
	for key := range l.buckets {
		if drop <= 0 {
			break
		}
		delete(l.buckets, key)
		drop--
	}
}

// len is the number of keys tracked.
func (l *keyedLimiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// allowRate takes a token of key's bucket in l, or answers 429
// rate_limited with Retry-After and returns false.
func (c *Coordinator) allowRate(ctx *fasthttp.RequestCtx, l *keyedLimiter, key, what string) bool {
	ok, wait := l.allow(key, c.now())
	if ok {
		return true
	}
	writeRateLimited(ctx, "too many "+what+"; retry later", wait)
	return false
}

// writeRateLimited answers 429 rate_limited with message, retry_after_ms
// and Retry-After (whole seconds, rounded up) for wait.
func writeRateLimited(ctx *fasthttp.RequestCtx, message string, wait time.Duration) {
	writeErrorDetails(ctx, api.CodeRateLimited, message, map[string]any{"retry_after_ms": wait.Milliseconds()})
	setRetryAfter(ctx, wait)
}

// setRetryAfter sets the Retry-After header to wait, rounded up to whole
// seconds.
func setRetryAfter(ctx *fasthttp.RequestCtx, wait time.Duration) {
	ctx.Response.Header.Set("Retry-After", strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10))
}
