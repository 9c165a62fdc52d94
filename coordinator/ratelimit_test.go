package coordinator

import (
	"fmt"
	"testing"
	"time"
)

// A key gets its burst, then one token per 1/rate; keys are independent;
// the table never holds more than its bound, and a dropped key gets no
// more than a fresh burst.
func TestKeyedLimiter(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	l := newKeyedLimiter(2, 3, 100)
	for i := range 3 {
		if ok, _ := l.allow("a", t0); !ok {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	ok, wait := l.allow("a", t0)
	if ok || wait <= 0 || wait > 500*time.Millisecond {
		t.Fatalf("past the burst: ok %t wait %v, want a refusal for ≤ 500ms", ok, wait)
	}
	if ok, _ := l.allow("b", t0); !ok {
		t.Fatal("another key refused")
	}
	if ok, _ := l.allow("a", t0.Add(500*time.Millisecond)); !ok {
		t.Fatal("a refilled token refused")
	}
	for i := range 1000 {
		l.allow(fmt.Sprintf("k%d", i), t0)
		if n := l.len(); n > 100 {
			t.Fatalf("%d keys tracked, bound 100", n)
		}
	}
}

// reserveUpTo reserves a held heartbeat's tokens: the first within the
// longest wait, the next ones only while they come by the end of its
// hold, each in line after what the key reserved before; it reserves
// nothing when the first comes too late, and what it did not reserve is
// the next caller's.
func TestReserveUpTo(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	l := newKeyedLimiter(2, 1, 100) // a token every 500ms
	if ok, _ := l.allowN("a", t0, 1); !ok {
		t.Fatal("the burst refused")
	}
	k, at := l.reserveUpTo("a", t0, 6, 5*time.Second, t0.Add(1200*time.Millisecond))
	if k != 2 || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("six owed, held 1.2s: %d reserved, the last at %v; want 2 (at 500ms and 1s), the last at 1s", k, at.Sub(t0))
	}
	k, at = l.reserveUpTo("a", t0, 6, 5*time.Second, t0.Add(100*time.Millisecond))
	if k != 1 || !at.Equal(t0.Add(1500*time.Millisecond)) {
		t.Fatalf("held 100ms, the next token at 1.5s: %d reserved at %v; want the one token (its hold ends first), at 1.5s", k, at.Sub(t0))
	}
	if k, _ := l.reserveUpTo("a", t0, 6, time.Second, t0.Add(5*time.Second)); k != 0 {
		t.Fatalf("the next token at 2s, a wait of 1s: %d reserved, want none", k)
	}
	delay, _, ok := l.reserve("a", t0, 5*time.Second)
	if !ok || delay != 2*time.Second {
		t.Fatalf("the next caller: token in %v (ok %t), want the one at 2s: nothing reserved past the three", delay, ok)
	}
}
