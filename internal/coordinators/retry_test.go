package coordinators

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// What may be sent again: a request that provably did not land, any
// method; one that may have landed, idempotent methods only; an answer,
// never. Pauses double up to Max and stop at the budget.
func TestRetryDecides(t *testing.T) {
	t0 := time.Unix(1000, 0)
	policy := Retry{Budget: time.Second, Base: 100 * time.Millisecond, Max: 400 * time.Millisecond}
	for _, c := range []struct {
		method  string
		outcome Outcome
		again   bool
	}{
		{http.MethodPost, NoLeader, true}, {http.MethodPost, Unsent, true}, {http.MethodPost, Unavailable, false},
		{http.MethodGet, Unavailable, true}, {http.MethodPut, Unavailable, true}, {http.MethodDelete, Unavailable, true},
		{http.MethodGet, Answered, false}, {http.MethodPost, Answered, false},
	} {
		r := policy
		if _, again := r.Next(t0, c.method, c.outcome); again != c.again {
			t.Errorf("%s after outcome %d: again %t, want %t", c.method, c.outcome, again, c.again)
		}
	}

	r := policy
	now := t0
	var waits []time.Duration
	for {
		wait, again := r.Next(now, http.MethodPost, NoLeader)
		if !again {
			break
		}
		waits = append(waits, wait)
		now = now.Add(wait)
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	if len(waits) != len(want) || waits[0] != want[0] || waits[1] != want[1] || waits[2] != want[2] {
		t.Fatalf("waits %v, want %v (the next 400ms would pass the 1s budget)", waits, want)
	}
	if got := r.GaveUp(now, http.MethodPost); !strings.Contains(got, "after 4 attempts over 700ms") || !strings.Contains(got, "not carried out") {
		t.Fatalf("GaveUp: %q", got)
	}
	lost := policy
	lost.Next(t0, http.MethodPost, Unavailable)
	if got := lost.GaveUp(t0, http.MethodPost); !strings.Contains(got, "may have been carried out") {
		t.Fatalf("GaveUp of a POST that may have landed: %q", got)
	}
}
