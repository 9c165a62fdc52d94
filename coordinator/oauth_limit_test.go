package coordinator

import (
	"testing"
	"time"
)

func TestFailureLimiter(t *testing.T) {
	l := newFailureLimiter(3, time.Minute, 4)
	t0 := time.Unix(1000, 0)
	for i := range 3 {
		if w := l.wait(t0, "id:a", "ip:1"); w != 0 {
			t.Fatalf("failure %d refused in advance (%v)", i, w)
		}
		l.fail(t0, "id:a", "ip:1")
	}
	if w := l.wait(t0, "id:a", "ip:2"); w != 20*time.Second {
		t.Fatalf("after 3 failures the client id waits %v, want 20s (one failure's refill)", w)
	}
	if w := l.wait(t0, "id:b", "ip:1"); w == 0 {
		t.Fatal("after 3 failures the address may try another client id")
	}
	if w := l.wait(t0, "id:b", "ip:2"); w != 0 {
		t.Fatalf("an untouched id and address wait %v", w)
	}
	if w := l.wait(t0.Add(20*time.Second), "id:a", "ip:2"); w != 0 {
		t.Fatalf("after the refill the client id still waits %v", w)
	}
	// The table holds 4 keys: two more fill it; a fifth new key is
	// refused while every tracked key is still failing, accepted once
	// their buckets refilled (and they are forgotten).
	l.fail(t0, "id:b", "ip:2")
	if w := l.wait(t0, "id:c"); w == 0 {
		t.Fatal("a new key was accepted in a full table of failing keys")
	}
	if w := l.wait(t0.Add(time.Minute), "id:c"); w != 0 {
		t.Fatalf("a new key after every bucket refilled waits %v", w)
	}
	if len(l.buckets) != 0 {
		t.Fatalf("refilled buckets kept: %v", l.buckets)
	}
}
