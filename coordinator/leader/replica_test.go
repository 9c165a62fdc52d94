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
	if s := r.Stats(); s != (Stats{Takeovers: 1, StepDowns: 1, FencedWrites: 2}) {
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
