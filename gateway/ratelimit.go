package gateway

import (
	"sync"
	"time"
)

// rateLimiter enforces per-capability byte rates with token buckets keyed
// by jti: a bucket holds up to one second of bytes, a request is admitted
// while the bucket is positive, and the bytes actually served are taken
// afterwards (so it may go negative and the next request waits). The rate
// comes from the capability's qos or a live override and may change
// between requests. At most max buckets are kept; a full bucket carries no
// state and is the first to go.
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
	return 0, time.Duration(-b.tokens/b.rate*float64(time.Second)) + time.Millisecond
}

// take charges n bytes served to jti's bucket.
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
