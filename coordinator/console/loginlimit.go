package console

import (
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/capgate/capgate/internal/failguard"
)

// loginLimiter bounds failed logins per client address: each address has
// a bucket of login_max_failures failures, refilled evenly over
// login_failure_window. An attempt counts as a failure from the moment it
// begins until its token proved right, so an address has at most that
// many wrong guesses in the window, however many it sends at once; an
// address whose bucket is empty is refused (429) before its token is
// looked at, whether it would be right or not. At most entries addresses
// are tracked: a full table first forgets the addresses whose bucket has
// refilled with no attempt in flight (a full bucket is the same as none),
// and if every one is still failing it refuses new addresses rather than
// forget one that is guessing. IPv6 addresses count per /64, the block
// one host is usually given. Safe for concurrent use.
type loginLimiter struct {
	limit   rate.Limit
	burst   int
	entries int

	mu      sync.Mutex
	buckets map[string]*loginBucket
}

type loginBucket struct {
	failures *rate.Limiter // failures left
	inflight int           // attempts begun and not ended, each a failure until it succeeds
}

func newLoginLimiter(maxFailures int, window time.Duration, entries int) *loginLimiter {
	return &loginLimiter{
		limit: rate.Limit(float64(maxFailures) / window.Seconds()), burst: maxFailures, entries: entries,
		buckets: map[string]*loginBucket{},
	}
}

// loginAttempt is one login being checked.
type loginAttempt struct {
	l *loginLimiter
	b *loginBucket
}

// addressKey is the bucket of a: the address, or its /64 for IPv6
// (failguard.Key, the rule every per-address limit of capgate keeps).
func addressKey(a netip.Addr) string {
	if !a.IsValid() {
		return "unknown"
	}
	k := failguard.Key(a)
	if k.Is6() {
		return k.String() + "/64"
	}
	return k.String()
}

// begin starts an attempt from addr at now. wait > 0 refuses it (nothing
// is counted): how long until the address may fail once more.
func (l *loginLimiter) begin(addr netip.Addr, now time.Time) (a loginAttempt, key string, wait time.Duration) {
	key = addressKey(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= l.entries && !l.forgetRefilledLocked(now) {
			return loginAttempt{}, key, l.refill(1)
		}
		b = &loginBucket{failures: rate.NewLimiter(l.limit, l.burst)}
		l.buckets[key] = b
	}
	if short := float64(b.inflight+1) - b.failures.TokensAt(now); short > 0 {
		return loginAttempt{}, key, l.refill(short)
	}
	b.inflight++
	return loginAttempt{l: l, b: b}, key, 0
}

// refill is how long failures take to refill.
func (l *loginLimiter) refill(failures float64) time.Duration {
	return max(time.Millisecond, time.Duration(failures/float64(l.limit)*float64(time.Second)))
}

// forgetRefilledLocked drops the addresses whose bucket is full again
// with no attempt in flight, and reports whether there is room for one
// more.
func (l *loginLimiter) forgetRefilledLocked(now time.Time) bool {
	for key, b := range l.buckets {
		if b.inflight == 0 && b.failures.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, key)
		}
	}
	return len(l.buckets) < l.entries
}

// end ends the attempt at now: a failure takes one from its address's
// bucket, a right token costs nothing.
func (a loginAttempt) end(failed bool, now time.Time) {
	a.l.mu.Lock()
	defer a.l.mu.Unlock()
	a.b.inflight--
	if failed {
		a.b.failures.ReserveN(now, 1)
	}
}

// tracked is the number of addresses in the table.
func (l *loginLimiter) tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
