package kafkaproto

import (
	"fmt"
	"testing"
	"time"
)

// TestRenewalPauseEnds: the empty answers a connection of a same-named
// credential gets while a member of its name, client.id and address
// lives (groups.renewalPending: a renewal not carried over yet) end at
// the credential's own expiry and never reopen for it; they need a
// member of the holder; the credentials remembered are bounded (full of
// live ones, a new credential is refused, as before the relaxation;
// expired ones make room). Before, any number of credentials paused (no
// bound on what the listener remembered or let pause).
func TestRenewalPauseEnds(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	h := holderKey{issuer: "capgate", subject: "app", clientID: "kjs", ip: "10.0.0.1"}
	g := &groups{byHolder: map[holderKey]int{h: 1}, pauses: map[pauseKey]renewalPause{}}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	exp := at(10 * time.Second) // J's own expiry
	for _, c := range []struct {
		at   time.Duration
		want bool
	}{{time.Second, true}, {9 * time.Second, true}, {10 * time.Second, false}, {time.Hour, false}} {
		if got := g.renewalPending(h, "J", exp, at(c.at)); got != c.want {
			t.Errorf("J at %v: paused %v, want %v", c.at, got, c.want)
		}
	}
	// A later expiry presented for J (a clock skewed caller) does not
	// reopen its window: it is J's first one.
	if g.renewalPending(h, "J", at(time.Hour), at(11*time.Second)) {
		t.Error("J paused again after its window")
	}
	// No member of the holder: refused.
	if g.renewalPending(holderKey{issuer: "capgate", subject: "app", clientID: "other", ip: "10.0.0.1"}, "L", at(time.Hour), at(time.Second)) {
		t.Error("paused with no member of its holder")
	}
	// Bounded: full of live credentials, a new one is refused; once they
	// expired they make room.
	g = &groups{byHolder: map[holderKey]int{h: 1}, pauses: map[pauseKey]renewalPause{}}
	for i := range renewalPausesMax {
		g.renewalPending(h, fmt.Sprint("filler", i), at(20*time.Second), at(12*time.Second))
	}
	if len(g.pauses) != renewalPausesMax {
		t.Fatalf("%d pauses remembered, want %d", len(g.pauses), renewalPausesMax)
	}
	if g.renewalPending(h, "M", at(time.Hour), at(13*time.Second)) {
		t.Error("a credential paused past renewalPausesMax")
	}
	if !g.renewalPending(h, "M", at(time.Hour), at(21*time.Second)) || len(g.pauses) != 1 {
		t.Errorf("expired pauses not dropped to make room: %d left", len(g.pauses))
	}
}

// TestRenewalPauseIsBoundedByReauthMax: a long-lived credential (an
// admin-minted one lives days) pauses for at most pauseMax
// (kafka_reauth_max + request_timeout: every connection of a client
// that re-authenticates presents its latest credential within
// kafka_reauth_max, its group connection carrying the member over) from
// its first paused fetch, then never again; one expiring sooner still
// ends at its own expiry. Before, a same-named credential of another
// holder was answered empty for its whole lifetime (review24).
func TestRenewalPauseIsBoundedByReauthMax(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	h := holderKey{issuer: "capgate", subject: "app", clientID: "kjs", ip: "10.0.0.1"}
	const pauseMax = 10*time.Minute + 10*time.Second
	g := &groups{byHolder: map[holderKey]int{h: 1}, pauses: map[pauseKey]renewalPause{}, pauseMax: pauseMax}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	days := at(72 * time.Hour)
	for _, c := range []struct {
		cred string
		exp  time.Time
		at   time.Duration
		want bool
	}{
		{"D", days, time.Second, true}, // its first paused fetch
		{"D", days, pauseMax, true},
		{"D", days, pauseMax + time.Second, false},
		{"D", days, time.Hour, false}, // not reopened
		{"S", at(70 * time.Second), 60 * time.Second, true},
		{"S", at(70 * time.Second), 70 * time.Second, false}, // its own expiry, sooner
	} {
		if got := g.renewalPending(h, c.cred, c.exp, at(c.at)); got != c.want {
			t.Errorf("%s (expiring %v) at %v: paused %v, want %v", c.cred, c.exp.Sub(t0), c.at, got, c.want)
		}
	}
}
