package console

import (
	"net/netip"
	"testing"
	"time"
)

// TestLoginLimiter: an address has max failures per window, counted from
// the moment an attempt begins (attempts in flight cannot outrun it); a
// right token gives its failure back; failures refill evenly; IPv6
// addresses share a bucket per /64; a full table forgets refilled
// addresses before it refuses a new one.
func TestLoginLimiter(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newLoginLimiter(2, time.Minute, 2) // a failure refills in 30 s
	a := netip.MustParseAddr("192.0.2.1")
	first, _, wait := l.begin(a, t0)
	second, _, wait2 := l.begin(a, t0)
	if wait != 0 || wait2 != 0 {
		t.Fatalf("the first two attempts waited %s, %s", wait, wait2)
	}
	if _, _, wait := l.begin(a, t0); wait != 30*time.Second {
		t.Fatalf("a third attempt while two are in flight: wait %s, want 30s", wait)
	}
	first.end(false, t0) // a right token costs nothing
	second.end(true, t0)
	third, _, wait := l.begin(a, t0)
	if wait != 0 {
		t.Fatalf("after one success and one failure: wait %s", wait)
	}
	third.end(true, t0)
	if _, _, wait := l.begin(a, t0.Add(10*time.Second)); wait != 20*time.Second {
		t.Fatalf("two failures 10 s ago: wait %s, want 20s", wait)
	}
	if next, _, wait := l.begin(a, t0.Add(30*time.Second)); wait != 0 {
		t.Fatalf("a failure refilled after 30 s: wait %s", wait)
	} else {
		next.end(true, t0.Add(30*time.Second))
	}

	v6a, v6b := netip.MustParseAddr("2001:db8:1:2::1"), netip.MustParseAddr("2001:db8:1:2:ffff::9")
	at := t0.Add(time.Hour)
	if _, key, _ := l.begin(v6a, at); key != "2001:db8:1:2::/64" {
		t.Fatalf("IPv6 key %q", key)
	}
	if _, _, wait := l.begin(v6b, at); wait != 0 || l.tracked() != 2 {
		t.Fatalf("same /64: wait %s, tracked %d", wait, l.tracked())
	}
	// The table (2) is full: the v4 address has refilled and goes.
	if _, _, wait := l.begin(netip.MustParseAddr("198.51.100.7"), at); wait != 0 || l.tracked() != 2 {
		t.Fatalf("a new address in place of a refilled one: wait %s, tracked %d", wait, l.tracked())
	}
	if _, _, wait := l.begin(netip.MustParseAddr("198.51.100.8"), at); wait != 30*time.Second || l.tracked() != 2 {
		t.Fatalf("a new address with the table full of failing ones: wait %s, tracked %d", wait, l.tracked())
	}
}
