package leader

import (
	"errors"
	"testing"
)

func newReplica(t *testing.T) *Replica {
	t.Helper()
	return NewReplica(cfg("a"), "http://a", at(0))
}

// A position seen again is no sign of life: only newly applied commits
// keep a follower from standing.
func TestReplicaObservesOnlyNewCommits(t *testing.T) {
	r := newReplica(t)
	p := Position{Commits: 3, Writer: "b", Leader: Hint{ID: "b", URL: "http://b"}}
	r.Observe(at(500), p)
	r.Observe(at(1500), p) // the same position, read again
	if d := r.Next(at(1600)); d.Do != Promote {
		t.Fatalf("%+v, want Promote: a repeated position counted as a commit", d)
	}
	// A new follower counts from zero again.
	r = newReplica(t)
	r.Observe(at(500), p)
	r.Following()
	r.Observe(at(1500), Position{Commits: 3, Writer: "b"})
	if d := r.Next(at(1600)); d.Do != None {
		t.Fatalf("%+v: the new follower's commits did not count", d)
	}
}

// Another replica writing under this replica's id counts as a live
// leader (told apart by its URL), and is reported once.
func TestReplicaTellsTheSameIDApartByURL(t *testing.T) {
	r := newReplica(t)
	other := Hint{ID: "a", URL: "http://elsewhere"}
	if !r.Observe(at(500), Position{Commits: 1, Writer: "a", Leader: other}) {
		t.Fatal("not reported")
	}
	if r.Observe(at(900), Position{Commits: 2, Writer: "a", Leader: other}) {
		t.Fatal("reported twice")
	}
	d := r.Next(at(1000))
	if d.Do != None || d.Leader.URL != "http://elsewhere" {
		t.Fatalf("%+v: want it to follow the other writer", d)
	}
	// Its own old commits (its own URL) are not a live leader.
	r = newReplica(t)
	r.Observe(at(900), Position{Commits: 1, Writer: "a", Leader: Hint{ID: "a", URL: "http://a"}})
	if d := r.Next(at(1100)); d.Do != Promote {
		t.Fatalf("%+v, want Promote", d)
	}
}

// A step-down that finishes while a beat is in flight is stepped only
// after the beat's outcome; the view names itself and serves only while
// it leads; the counts follow.
func TestReplicaLeadsStepsDownAndCounts(t *testing.T) {
	r := newReplica(t)
	if d := r.Next(at(1100)); d.Do != Promote {
		t.Fatalf("%+v", d)
	}
	if v := r.View(); v.Serving || v.Route("/v1/sync") != RouteNotLeader || v.Route("/readyz") != RoutePublic {
		t.Fatalf("candidate view %+v", v)
	}
	r.Promoted(at(1150), nil, false)
	if d := r.Next(at(1150)); d.Do != Beat {
		t.Fatalf("%+v", d)
	}
	v := r.View()
	if !v.Serving || v.Leader != (Hint{ID: "a", URL: "http://a"}) || v.Route("/v1/groups/g/join") != RouteServe || v.Route("/readyz") != RouteServe {
		t.Fatalf("leader view %+v", v)
	}
	// The loop's persist fails fenced while the beat is in flight.
	r.Wrote(at(1160), false, errors.New("fenced"), true)
	if d := r.Next(at(1160)); d.Do != StepDown {
		t.Fatalf("%+v", d)
	}
	if v := r.View(); v.Serving || v.Leader != (Hint{}) {
		t.Fatalf("stepping-down view %+v", v)
	}
	r.Stopped(at(1170))
	if r.Role() != SteppingDown {
		t.Fatalf("stopped before the beat's outcome: %s", r.Role())
	}
	r.Wrote(at(1180), true, errors.New("fenced"), true)
	if r.Role() != Follower {
		t.Fatalf("after the beat's outcome: %s", r.Role())
	}
	if s := r.Stats(); s != (Stats{Takeovers: 1, StepDowns: 1, FencedWrites: 2, Promotions: 1}) {
		t.Fatalf("stats %+v", s)
	}
}

// Which answers wait for the log's confirmation.
func TestMustConfirm(t *testing.T) {
	for a, want := range map[Answer]bool{AnswerPersisted: false, AnswerSync: true, AnswerCapabilities: true, AnswerNews: false} {
		if MustConfirm(a) != want {
			t.Errorf("MustConfirm(%d) = %t", a, !want)
		}
	}
}

// A candidate whose takeovers keep failing after their barrier (K: a
// replica with the wrong KEK, before the store checked first) must not
// keep the other followers from standing: barriers count once between two
// writes of a leader. Without the rule every failed attempt's barrier
// renewed the lease of every follower and none ever stood.
func TestFailedTakeoverBarriersCountOnce(t *testing.T) {
	r := newReplica(t) // lease 1 s, stagger 100 ms: stands 1.1 s after the last live commit
	leaderHint := Hint{ID: "b", URL: "http://b"}
	r.Observe(at(100), Position{Commits: 5, Writer: "b", Leader: leaderHint}) // the leader's last beat
	// The leader dies; a bad candidate "c" writes a barrier every 900 ms
	// and fails after it.
	r.Observe(at(1000), Position{Commits: 6, Barriers: 1, Writer: "c", Leader: leaderHint})
	if d := r.Next(at(1800)); d.Do != None {
		t.Fatalf("%+v: the first barrier did not give its candidate a lease", d)
	}
	r.Observe(at(1900), Position{Commits: 7, Barriers: 2, Writer: "c", Leader: leaderHint})
	r.Observe(at(2000), Position{Commits: 8, Barriers: 3, Writer: "c", Leader: leaderHint})
	if d := r.Next(at(2100)); d.Do != Promote {
		t.Fatalf("%+v, want Promote at 1.1 s after the first barrier: later barriers of failed takeovers counted", d)
	}
}

// A winner's barrier counts (the others wait for its first beat), and
// after a leader's write the next barrier counts again.
func TestBarrierCountsAgainAfterALeaderWrite(t *testing.T) {
	r := newReplica(t)
	r.Observe(at(100), Position{Commits: 1, Barriers: 1, Writer: "b"}) // b's barrier
	r.Observe(at(300), Position{Commits: 2, Barriers: 1, Writer: "b", Leader: Hint{ID: "b", URL: "http://b"}})
	r.Observe(at(900), Position{Commits: 3, Barriers: 2, Writer: "c", Leader: Hint{ID: "b", URL: "http://b"}})
	if d := r.Next(at(1900)); d.Do != None {
		t.Fatalf("%+v: the barrier after the leader's beat did not count", d)
	}
	if d := r.Next(at(2000)); d.Do != Promote {
		t.Fatalf("%+v, want Promote 1.1 s after that barrier", d)
	}
	// Several commits applied at once, a beat among them: a leader write.
	r = newReplica(t)
	r.Observe(at(100), Position{Commits: 1, Barriers: 1, Writer: "c"})
	r.Observe(at(900), Position{Commits: 4, Barriers: 3, Writer: "c"})
	if d := r.Next(at(1900)); d.Do != None {
		t.Fatalf("%+v: a batch holding a leader write did not count", d)
	}
}

// An unfit replica (its settings differ from the log's) never stands,
// however long the log is silent, and says why; Unfit reports itself
// once; the view carries the reason.
func TestUnfitReplicaNeverStands(t *testing.T) {
	r := newReplica(t)
	r.Observe(at(100), Position{Commits: 1, Writer: "b", Leader: Hint{ID: "b", URL: "http://b"}})
	if !r.Unfit(at(200), "issuer: the log's \"x\", ours \"y\"") {
		t.Fatal("first Unfit not reported")
	}
	if r.Unfit(at(300), "again") {
		t.Fatal("Unfit reported twice")
	}
	for ms := 300; ms <= 60_000; ms += 700 {
		d := r.Next(at(ms))
		if d.Do != None || d.Role != Follower {
			t.Fatalf("at %d ms: %+v, want a follower doing nothing", ms, d)
		}
		if ms > 600 && d.Leader != (Hint{}) {
			t.Fatalf("at %d ms it still names the silent leader %+v", ms, d.Leader)
		}
	}
	if v := r.View(); v.Unfit != "again" || v.Serving {
		t.Fatalf("view %+v", v)
	}
	if s := r.Stats(); s.Promotions != 0 {
		t.Fatalf("stats %+v: it attempted a takeover", s)
	}
	// A failed Promote that found the log incompatible: the shell steps
	// Promoted, then Unfit; no second attempt follows.
	r = newReplica(t)
	if d := r.Next(at(1100)); d.Do != Promote {
		t.Fatalf("%+v", d)
	}
	r.Promoted(at(1150), errors.New("cannot take this log over"), false)
	r.Unfit(at(1150), "cannot take this log over")
	for ms := 1150; ms <= 30_000; ms += 500 {
		if d := r.Next(at(ms)); d.Do != None {
			t.Fatalf("at %d ms: %+v after an incompatible Promote", ms, d)
		}
	}
	if s := r.Stats(); s.Promotions != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// A replica restarted under the id of a leader that resigned reads its
// own resignation (no URL) without taking it for another replica writing
// under its id.
func TestOwnResignationIsNoSameIDAlarm(t *testing.T) {
	r := NewReplica(cfg("a"), "http://a", at(0))
	if r.Observe(at(100), Position{Commits: 2, Barriers: 1, Writer: "a", Leader: Hint{ID: "a"}, Resigned: true}) {
		t.Fatal("its own resignation read as another replica under its id")
	}
}
