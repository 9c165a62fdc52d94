package leader

import (
	"errors"
	"testing"
	"time"
)

// paced is cfg with the lease stretched by the log's pace up to 4 s
// (coordinator's default replica.lease_timeout_max).
func paced(id string) Config {
	c := cfg(id)
	c.LeaseTimeoutMax = 4 * time.Second
	return c
}

// slowLeader is a leader whose every beat took 1.5 s, as on a machine at
// load 15-18 (e2e/ha); it returns it with its last beat just committed
// at the returned time.
func slowLeader(t *testing.T, cfg Config) (*Elector, time.Time) {
	t.Helper()
	e := New(cfg, at(0))
	expect(t, e.Decide(at(1100)), Candidate, Promote)
	e.Step(at(1200), PromoteDone{})
	now := at(1200)
	for range slowSamples {
		expect(t, e.Decide(now), Leader, Beat)
		now = now.Add(1500 * time.Millisecond)
		e.Step(now, WriteDone{Beat: true})
		expect(t, e.Decide(now), Leader, None)
		now = now.Add(cfg.BeatInterval)
	}
	return e, now
}

// TestSlowBeatsKeepTheLeaderLeading: a leader whose beats take 1.5 s
// gets, once its lease lapses with a beat in flight, twice that to hear
// back — a beat committing 2.5 s after it was sent keeps it leading. With
// the lease fixed, it stepped down 2 s after its last write while the
// beat was about to commit (e2e/ha at load 18: 'no write succeeded for
// 2.017s', the beat committed ~40 ms later), and the shard went through
// a takeover for nothing. The stretch has a ceiling: a beat that never
// returns steps it down at LeaseTimeoutMax after the lapse.
func TestSlowBeatsKeepTheLeaderLeading(t *testing.T) {
	e, now := slowLeader(t, paced("a"))
	expect(t, e.Decide(now), Leader, Beat)
	wrote := now.Add(-200 * time.Millisecond)
	d := e.Decide(wrote.Add(time.Second)) // the lease lapses, the beat in flight
	expect(t, d, Leader, None)
	// 1 s + min(2 × 1.7 s, 4 s): its commits were 1.7 s apart (a beat of
	// 1.5 s, then the 200 ms beat interval), as the followers saw them.
	if want := wrote.Add(4400 * time.Millisecond); !d.At.Equal(want) {
		t.Fatalf("renewal ends %s after the last write, want 4.4s", d.At.Sub(wrote))
	}
	expect(t, e.Decide(wrote.Add(2100*time.Millisecond)), Leader, None) // where the fixed lease stepped down
	e.Step(now.Add(2500*time.Millisecond), WriteDone{Beat: true})
	expect(t, e.Decide(now.Add(2500*time.Millisecond)), Leader, None)

	e, now = slowLeader(t, paced("a"))
	expect(t, e.Decide(now), Leader, Beat) // it hangs
	wrote = now.Add(-200 * time.Millisecond)
	e.Decide(wrote.Add(time.Second))
	expect(t, e.Decide(wrote.Add(4399*time.Millisecond)), Leader, None)
	expect(t, e.Decide(wrote.Add(4400*time.Millisecond)), SteppingDown, StepDown)
}

// TestSlowPersistsKeepTheLeaderLeading: a leader whose beats are quick
// but whose Ready persists take 2.5 s (a handoff of 600 partitions on a
// starved machine) gets, once its lease lapses behind such a persist,
// twice that gap between its commits to hear back — what its followers,
// who saw its commits 2.5 s apart, give it before they stand. With only
// its beats paced it stepped down 2 s after its last write while they
// still waited (e2e/ha at load 20-24: 'no write succeeded for 2.6s',
// the followers' leases 3.4 and 4.4 s), and three replicas then fenced
// one another for 7 s.
func TestSlowPersistsKeepTheLeaderLeading(t *testing.T) {
	e := New(paced("a"), at(0))
	expect(t, e.Decide(at(1100)), Candidate, Promote)
	e.Step(at(1200), PromoteDone{})
	now := at(1200)
	for range slowSamples / 2 { // a quick beat, then a 2.5 s persist
		expect(t, e.Decide(now), Leader, Beat)
		now = now.Add(50 * time.Millisecond)
		e.Step(now, WriteDone{Beat: true})
		now = now.Add(2500 * time.Millisecond)
		e.Step(now, WriteDone{})
	}
	wrote := now
	expect(t, e.Decide(now), Leader, Beat) // queued behind the next slow persist
	d := e.Decide(wrote.Add(time.Second))  // the lease lapses
	expect(t, d, Leader, None)
	if want := wrote.Add(5 * time.Second); !d.At.Equal(want) { // 1 s + min(2 × 2.5 s, 4 s)
		t.Fatalf("renewal ends %s after the last write, want 5s", d.At.Sub(wrote))
	}
	expect(t, e.Decide(wrote.Add(2100*time.Millisecond)), Leader, None) // where it stepped down
	e.Step(wrote.Add(2600*time.Millisecond), WriteDone{})               // the persist commits
	expect(t, e.Decide(wrote.Add(2600*time.Millisecond)), Leader, None)
}

// TestSlowCommitsStretchTheFollowersLease: a follower that saw the
// leader's commits 1.7 s apart (beats of 1.5 s) does not stand 1.1 s
// after the last one — it fenced a live leader so, and the new one in
// turn (e2e/ha at load 15-18) — but after twice the pace, 3.4 s; a
// leader that stays silent is taken over then. Once commits come
// quickly again the lease falls back to LeaseTimeout.
func TestSlowCommitsStretchTheFollowersLease(t *testing.T) {
	e := New(paced("b"), at(0))
	now := at(0)
	for range slowSamples + 1 {
		now = now.Add(1700 * time.Millisecond)
		e.Step(now, Observed{Writer: "a", Leader: Hint{ID: "a", URL: "http://a"}})
	}
	d := e.Decide(now.Add(1100 * time.Millisecond))
	expect(t, d, Follower, None)
	if d.Leader.ID != "a" {
		t.Fatalf("after 1.1 s of a slow log the follower names %+v, want a", d.Leader)
	}
	expect(t, e.Decide(now.Add(3499*time.Millisecond)), Follower, None)
	expect(t, e.Decide(now.Add(3500*time.Millisecond)), Candidate, Promote) // 3.4 s + the stagger

	e = New(paced("b"), at(0))
	now = at(0)
	for range slowSamples + 1 {
		now = now.Add(1700 * time.Millisecond)
		e.Step(now, Observed{Writer: "a"})
	}
	for range slowSamples {
		now = now.Add(200 * time.Millisecond)
		e.Step(now, Observed{Writer: "a"})
	}
	expect(t, e.Decide(now.Add(1099*time.Millisecond)), Follower, None)
	expect(t, e.Decide(now.Add(1100*time.Millisecond)), Candidate, Promote)
}

// TestSlowTakeoverIsNotFencedByTheLoser: two replicas stood together; b's
// promotion was fenced by c's after 3 s (a fence waiting on the log).
// b then gives c a lease stretched by that pace (4 s at most) to show
// itself, where the fixed lease had b stand again 1.1 s later and fence
// c's promotion, still under way — the two fenced each other in turn
// for tens of seconds (e2e/ha: promotions of 2.2-3.5 s).
func TestSlowTakeoverIsNotFencedByTheLoser(t *testing.T) {
	e := New(paced("b"), at(0))
	expect(t, e.Decide(at(1100)), Candidate, Promote)
	e.Step(at(4100), PromoteDone{Err: errors.New("fenced"), Fenced: true})
	expect(t, e.Decide(at(4100)), Follower, None)
	expect(t, e.Decide(at(5300)), Follower, None) // the fixed lease stood here
	e.Step(at(6500), Observed{Writer: "c"})       // c's barrier, then its first beat
	e.Step(at(7000), Observed{Writer: "c", Leader: Hint{ID: "c", URL: "http://c"}})
	if d := e.Decide(at(7100)); d.Role != Follower || d.Leader.ID != "c" {
		t.Fatalf("after c's first beat: %s naming %+v, want a follower naming c", d.Role, d.Leader)
	}
}

// TestLeaseNotStretchedWithoutAMax: LeaseTimeoutMax zero (or not above
// LeaseTimeout) keeps the lease fixed whatever the pace — the
// setting of half the simulation's replica seeds (the other half draw a max:
// e2e/sim) and of the tests that do not stretch it.
func TestLeaseNotStretchedWithoutAMax(t *testing.T) {
	for _, max := range []time.Duration{0, time.Second} {
		c := cfg("b")
		c.LeaseTimeoutMax = max
		e := New(c, at(0))
		now := at(0)
		for range slowSamples + 1 {
			now = now.Add(1700 * time.Millisecond)
			e.Step(now, Observed{Writer: "a"})
		}
		expect(t, e.Decide(now.Add(1099*time.Millisecond)), Follower, None)
		expect(t, e.Decide(now.Add(1100*time.Millisecond)), Candidate, Promote)
	}
}

// TestTakeoverBarrierGetsHalfTheMaxAtLeast: a follower whose log was
// quick sees c's takeover barrier; c reads the log to its end and
// restores the state before its first beat, which took 1.2-8 s at load
// 15-30. The follower gives it half of LeaseTimeoutMax (2 s), not a
// lease: at 1.1 s it stood and fenced c, and c, following again, fenced
// it back. Through Replica: a position that applied only barriers is a
// takeover.
func TestTakeoverBarrierGetsHalfTheMaxAtLeast(t *testing.T) {
	r := NewReplica(paced("b"), "http://b", at(0))
	pos := Position{Commits: 1, Writer: "a", Leader: Hint{ID: "a", URL: "http://a"}}
	r.Observe(at(100), pos)
	pos.Commits, pos.Barriers, pos.Writer = 2, 1, "c" // c's barrier
	r.Observe(at(1000), pos)
	expect(t, r.Next(at(2100)), Follower, None) // the fixed lease stood here
	expect(t, r.Next(at(2900)), Follower, None)
	pos.Commits, pos.Leader = 3, Hint{ID: "c", URL: "http://c"} // c's first beat, 1.9 s after its barrier
	r.Observe(at(2900), pos)
	if d := r.Next(at(3000)); d.Role != Follower || d.Leader.ID != "c" {
		t.Fatalf("after c's first beat: %s naming %+v, want a follower naming c", d.Role, d.Leader)
	}
	// The 1.9 s from c's barrier to its first beat is the log's pace
	// now: a lease later c is not taken over.
	expect(t, r.Next(at(2900+1100)), Follower, None)
}

// TestDeadCandidatesBarrierIsTakenOverWithinHalfTheMax: a candidate that
// dies between its barrier and its first beat, on a quick log, is taken
// over half of LeaseTimeoutMax (+ the stagger) after its barrier. With
// the whole max the shard stayed leaderless 4 s + stagger (review25:
// ~4.6 s at the defaults, where a dead leader is taken over after
// ~1.6 s). On a log whose pace is stretched the barrier gets that
// stretch instead, up to the max.
func TestDeadCandidatesBarrierIsTakenOverWithinHalfTheMax(t *testing.T) {
	r := NewReplica(paced("b"), "http://b", at(0))
	now := at(0)
	for i := range uint64(slowSamples + 1) { // a's beats, 200 ms apart
		now = now.Add(200 * time.Millisecond)
		r.Observe(now, Position{Commits: i + 1, Writer: "a"})
	}
	barrier := now.Add(time.Second) // a died; c stood, fenced, wrote its barrier, died
	r.Observe(barrier, Position{Commits: slowSamples + 2, Barriers: 1, Writer: "c"})
	expect(t, r.Next(barrier.Add(2099*time.Millisecond)), Follower, None)
	if d := r.Next(barrier.Add(2100 * time.Millisecond)); d.Do != Promote {
		t.Fatalf("%s after the dead candidate's barrier: %s/%s (reason %q), want to stand (2 s + the stagger)",
			2100*time.Millisecond, d.Role, d.Do, d.Reason)
	}

	r = NewReplica(paced("b"), "http://b", at(0))
	now = at(0)
	for i := range uint64(slowSamples + 1) { // a's beats, 1.7 s apart: a slow log
		now = now.Add(1700 * time.Millisecond)
		r.Observe(now, Position{Commits: i + 1, Writer: "a"})
	}
	barrier = now.Add(3 * time.Second)
	r.Observe(barrier, Position{Commits: slowSamples + 2, Barriers: 1, Writer: "c"})
	expect(t, r.Next(barrier.Add(3499*time.Millisecond)), Follower, None) // 2 × 1.7 s + the stagger
	expect(t, r.Next(barrier.Add(3500*time.Millisecond)), Candidate, Promote)
}
