package kafkaproto

import (
	"fmt"
	"testing"
	"time"
)

// TestRenewalPauseEnds: the empty answers a connection of a same-named
// credential gets while a member of its name, client.id and address
// lives (groups.renewalPending: a renewal not carried over yet) end — for
// each credential once, at the expiry of the latest credential the
// holder's members had when it first paused — however long the member
// lives and renews; a credential of the member's next renewal gets its
// own window; the credentials remembered are bounded. Before, the pause
// lasted as long as any member of the holder lived: a same-named
// credential of another holder was answered empty, never refused.
func TestRenewalPauseEnds(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	h := holderKey{issuer: "capgate", subject: "app", clientID: "kjs", ip: "10.0.0.1"}
	g := &groups{byHolder: map[holderKey]int{h: 1}, holderUntil: map[holderKey]time.Time{h: t0.Add(10 * time.Second)},
		pauses: map[string]renewalPause{}}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	exp := at(time.Hour)
	for _, c := range []struct {
		cred string
		at   time.Duration
		want bool
	}{
		{"J", time.Second, true},
		{"J", 9 * time.Second, true},
		{"J", 10 * time.Second, false}, // the member's credential expired: J carried over by now, or never will
	} {
		if got := g.renewalPending(h, c.cred, exp, at(c.at)); got != c.want {
			t.Errorf("%s at %v: paused %v, want %v", c.cred, c.at, got, c.want)
		}
	}
	// The member carries over (to another credential) and lives on: J's
	// window does not open again, on any connection.
	g.mu.Lock()
	g.extendHolderLocked(h, at(time.Hour))
	g.mu.Unlock()
	if g.renewalPending(h, "J", exp, at(11*time.Second)) {
		t.Error("J paused again after its window, once the member renewed")
	}
	// The next renewal's credential has its own window.
	if !g.renewalPending(h, "K", exp, at(12*time.Second)) {
		t.Error("a credential first seen after the carry-over not paused")
	}
	// No member of the holder: refused.
	if g.renewalPending(holderKey{issuer: "capgate", subject: "app", clientID: "other", ip: "10.0.0.1"}, "L", exp, at(time.Second)) {
		t.Error("paused with no member of its holder")
	}
	// Bounded: full of live credentials, a new one is refused; once they
	// expired they make room.
	for i := range renewalPausesMax - len(g.pauses) {
		g.renewalPending(h, fmt.Sprint("filler", i), at(20*time.Second), at(13*time.Second))
	}
	if len(g.pauses) != renewalPausesMax {
		t.Fatalf("%d pauses remembered, want %d", len(g.pauses), renewalPausesMax)
	}
	if g.renewalPending(h, "M", exp, at(14*time.Second)) {
		t.Error("a credential paused past renewalPausesMax")
	}
	if !g.renewalPending(h, "M", exp, at(21*time.Second)) || len(g.pauses) > 3 {
		t.Errorf("expired pauses not dropped to make room: %d left", len(g.pauses))
	}
}
