package gateway

import (
	"testing"
	"time"
)

func TestRateLimiterBucket(t *testing.T) {
	l := newRateLimiter(10)
	t0 := time.Unix(1_800_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

	if allow, wait := l.admit("a", 1000, at(0)); allow != 1000 || wait != 0 {
		t.Fatalf("new bucket: allow %d wait %v", allow, wait)
	}
	l.take("a", 1000, 3000, at(0)) // 2000 bytes of debt
	if _, wait := l.admit("a", 1000, at(1000)); wait < time.Second || wait > 1100*time.Millisecond {
		t.Fatalf("after 1 s of 2 s debt: wait %v, want about 1 s", wait)
	}
	if allow, wait := l.admit("a", 1000, at(2500)); wait != 0 || allow != 500 {
		t.Fatalf("debt repaid: allow %d wait %v", allow, wait)
	}
	if allow, _ := l.admit("a", 1000, at(60_000)); allow != 1000 {
		t.Fatalf("bucket overfilled: %d", allow)
	}
	if allow, _ := l.admit("a", 100, at(60_000)); allow != 100 {
		t.Fatalf("a lower live rate must cap the bucket: %d", allow)
	}
}

func TestRateLimiterBounded(t *testing.T) {
	l := newRateLimiter(8)
	now := time.Unix(1_800_000_000, 0)
	for i := range 100 {
		jti := string(rune('A' + i))
		l.admit(jti, 10, now)
		l.take(jti, 10, 1000, now) // every bucket in debt: nothing is full
		if l.len() > 8 {
			t.Fatalf("%d buckets, bound 8", l.len())
		}
	}
	later := now.Add(time.Hour) // all refilled: evicted first
	l.admit("fresh", 10, later)
	if l.len() != 1 {
		t.Fatalf("full buckets not evicted first: %d left", l.len())
	}
}
