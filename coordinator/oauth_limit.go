package coordinator

import "time"

// failureLimiter bounds guessing at the token endpoint: every key (a
// client id, a source address) has a bucket of maxFailures failed
// attempts refilled evenly over window. A key whose bucket is empty is
// refused before its secret is even looked at, whether the next guess
// would be right or not, until a failure's worth has refilled. Successes
// cost nothing. At most entries keys are tracked; a full table first
// forgets keys whose bucket has refilled (a fresh bucket is the same as
// none), and if every tracked key is still failing it refuses new keys:
// under a guessing storm the endpoint sheds load rather than forget an
// attacker. Pure: time comes in as an argument. Not safe for concurrent
// use (the caller holds its lock).
type failureLimiter struct {
	maxFailures float64
	window      time.Duration
	entries     int
	buckets     map[string]bucket
}

type bucket struct {
	tokens float64   // failures still allowed
	at     time.Time // when tokens was computed
}

func newFailureLimiter(maxFailures int, window time.Duration, entries int) *failureLimiter {
	return &failureLimiter{maxFailures: float64(maxFailures), window: window, entries: entries, buckets: map[string]bucket{}}
}

// level is key's bucket refilled to now.
func (l *failureLimiter) level(key string, now time.Time) bucket {
	b, ok := l.buckets[key]
	if !ok {
		return bucket{tokens: l.maxFailures, at: now}
	}
	if elapsed := now.Sub(b.at); elapsed > 0 {
		b.tokens = min(l.maxFailures, b.tokens+l.maxFailures*float64(elapsed)/float64(l.window))
	}
	b.at = now
	return b
}

// wait is how long a request under keys must wait: 0 when every key
// may fail once more.
func (l *failureLimiter) wait(now time.Time, keys ...string) time.Duration {
	var longest time.Duration
	for _, k := range keys {
		b := l.level(k, now)
		if b.tokens >= 1 {
			continue
		}
		d := time.Duration((1 - b.tokens) / l.maxFailures * float64(l.window))
		longest = max(longest, d, time.Millisecond)
	}
	if longest == 0 && l.full(now, keys) {
		return l.window / time.Duration(max(1, int(l.maxFailures)))
	}
	return longest
}

// full reports whether a new key among keys could not be tracked.
func (l *failureLimiter) full(now time.Time, keys []string) bool {
	fresh := 0
	for _, k := range keys {
		if _, ok := l.buckets[k]; !ok {
			fresh++
		}
	}
	if len(l.buckets)+fresh <= l.entries {
		return false
	}
	for k := range l.buckets {
		if l.level(k, now).tokens >= l.maxFailures {
			delete(l.buckets, k)
		}
	}
	return len(l.buckets)+fresh > l.entries
}

// fail takes one failure from every key's bucket.
func (l *failureLimiter) fail(now time.Time, keys ...string) {
	for _, k := range keys {
		b := l.level(k, now)
		b.tokens = max(0, b.tokens-1)
		l.buckets[k] = b
	}
}
