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
