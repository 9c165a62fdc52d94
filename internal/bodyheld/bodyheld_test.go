package bodyheld

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestHolds: bodies are counted per holder and in all, the first of a
// holder (or of the server) let through whatever its size; a refusal is
// recorded for its request and ends with it; a hold no handler took
// within stale is swept when room is needed, one a handler runs never.
func TestHolds(t *testing.T) {
	now := time.Unix(1000, 0)
	b := New(10, 6, time.Second)
	var r [6]fasthttp.RequestHeader
	if !b.Take(&r[0], "a", 20, now) {
		t.Fatal("a holder's first body, larger than every cap, refused")
	}
	if b.Take(&r[1], "a", 1, now) || b.Refused(&r[1]) != OverHolder {
		t.Fatalf("a's second body: %v, want OverHolder", b.Refused(&r[1]))
	}
	if b.Take(&r[2], "b", 1, now) || b.Refused(&r[2]) != OverAll {
		t.Fatalf("b's body beside 20 bytes held: %v, want OverAll", b.Refused(&r[2]))
	}
	if got := b.Release(&r[1]); got != OverHolder || b.Pending() != 2 {
		t.Fatalf("release of a refusal: %v, %d pending", got, b.Pending())
	}
	b.Handling(&r[0])
	if b.Take(&r[3], "b", 1, now.Add(time.Hour)) {
		t.Fatal("a hold its handler runs was swept")
	}
	b.Release(&r[0])
	b.Release(&r[2])
	b.Release(&r[3])
	if b.Held() != 0 || b.Pending() != 0 {
		t.Fatalf("%d bytes, %d requests held after every release", b.Held(), b.Pending())
	}
	b.Take(&r[4], "a", 5, now) // its read fails unseen: never released
	if b.Take(&r[5], "a", 5, now.Add(500*time.Millisecond)) {
		t.Fatal("room made by sweeping a hold younger than stale")
	}
	if !b.Take(&r[5], "a", 5, now.Add(2*time.Second)) || b.Held() != 5 {
		t.Fatalf("the stale hold not swept: %d bytes held", b.Held())
	}
}
