package failguard

import (
	"net/netip"
	"testing"
	"time"
)

var t0 = time.Unix(1_800_000_000, 0)

func TestBudgetThenBlockedThenRefilled(t *testing.T) {
	g := New(2, 3, 10)
	a := netip.MustParseAddr("192.0.2.7")
	for i := range 3 {
		if _, blocked := g.Blocked(a, t0); blocked {
			t.Fatalf("blocked after %d failures of a burst of 3", i)
		}
		g.Failed(a, t0)
	}
	wait, blocked := g.Blocked(a, t0)
	if !blocked || wait != 500*time.Millisecond {
		t.Fatalf("after the burst: blocked=%t wait=%v, want blocked for 500ms (2/s)", blocked, wait)
	}
	if _, blocked := g.Blocked(netip.MustParseAddr("192.0.2.8"), t0); blocked {
		t.Fatal("another address is blocked")
	}
	if _, blocked := g.Blocked(a, t0.Add(500*time.Millisecond)); blocked {
		t.Fatal("still blocked once one failure refilled")
	}
	if _, blocked := g.Blocked(a, t0.Add(-time.Hour)); !blocked {
		t.Fatal("a clock stepping back unblocked the address")
	}
}

func TestBlockedChangesNothing(t *testing.T) {
	g := New(1, 1, 10)
	a := netip.MustParseAddr("192.0.2.7")
	for range 100 {
		g.Blocked(a, t0)
	}
	if g.Len() != 0 {
		t.Fatalf("checks alone tracked %d addresses", g.Len())
	}
	g.Failed(a, t0)
	if _, blocked := g.Blocked(a, t0); !blocked {
		t.Fatal("one failure of a burst of 1 did not block")
	}
}

func TestIPv6CountsPerSlash64AndMappedIPv4AsIPv4(t *testing.T) {
	g := New(1, 2, 10)
	g.Failed(netip.MustParseAddr("2001:db8:1:2::1"), t0)
	g.Failed(netip.MustParseAddr("2001:db8:1:2:ffff::9"), t0)
	if _, blocked := g.Blocked(netip.MustParseAddr("2001:db8:1:2::77"), t0); !blocked {
		t.Fatal("addresses of one /64 are separate budgets")
	}
	if _, blocked := g.Blocked(netip.MustParseAddr("2001:db8:1:3::1"), t0); blocked {
		t.Fatal("the next /64 is blocked")
	}
	g.Failed(netip.MustParseAddr("::ffff:192.0.2.1"), t0)
	g.Failed(netip.MustParseAddr("192.0.2.1"), t0)
	if _, blocked := g.Blocked(netip.MustParseAddr("192.0.2.1"), t0); !blocked {
		t.Fatal("an IPv4-mapped address is not its IPv4 address")
	}
}

// TestTableBounded: a flood of distinct addresses never grows the table
// past its bound; past it they share one overflow budget, and addresses
// whose buckets refilled make room again.
func TestTableBounded(t *testing.T) {
	g := New(1, 1, 4)
	for i := range 1000 {
		g.Failed(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), t0)
	}
	if g.Len() != 4 {
		t.Fatalf("tracked %d addresses, want the bound 4", g.Len())
	}
	if _, blocked := g.Blocked(netip.MustParseAddr("198.51.100.1"), t0); !blocked {
		t.Fatal("a new address past the bound escaped the shared overflow budget")
	}
	later := t0.Add(time.Minute) // every bucket refilled
	g.Failed(netip.MustParseAddr("198.51.100.1"), later)
	if g.Len() != 1 {
		t.Fatalf("after the refill the table holds %d, want only the new address", g.Len())
	}
}

func TestOff(t *testing.T) {
	var nilGuard *Guard
	for _, g := range []*Guard{New(0, 1, 1), nilGuard} {
		a := netip.MustParseAddr("192.0.2.7")
		for range 10 {
			g.Failed(a, t0)
		}
		if _, blocked := g.Blocked(a, t0); blocked {
			t.Fatal("a guard turned off blocked")
		}
	}
}
