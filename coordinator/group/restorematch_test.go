package group_test

import (
	"fmt"
	"testing"

	"github.com/capgate/capgate/coordinator/group"
)

// TestRestoreMatchIsBounded: a restore (a restart, a takeover) matches
// each distinct pattern of the restored members again, in the loop
// before it serves; every pattern was within limits.topic_pattern_steps
// when it joined, but the topics may have grown since (here: the bound
// was lowered). A pattern over the bound now is matched no further than
// the bound: its members restore with no topics, marked stale (describe
// says so) until they rejoin; the others restore as they were.
func TestRestoreMatchIsBounded(t *testing.T) {
	w := newWorld(t)
	topics := map[string]int32{}
	for i := range 1000 {
		topics[fmt.Sprintf("team-%04d.service-events", i)] = 1
	}
	w.topics(topics)
	join := func(g, pattern string) string {
		ref := w.nextRef()
		w.step(group.Join{Ref: ref, Group: g, ClientID: "c", TopicPattern: pattern, Credential: group.Credential{ID: "a"}})
		return mustReply[group.JoinReply](t, w, ref).MemberID
	}
	slow := join("slow", `(.?){30}x`) // ~3,000 steps a name, ~3 M in all
	cheap := join("cheap", `team-000[0-9]\..*`)
	const limit = 100_000
	w.cfg.Limits.TopicPatternSteps = limit
	w.restart(0)
	if spent := w.m.PatternSteps(); spent > limit+limit/2 {
		t.Fatalf("the restore matched %d steps; want the slow pattern's at most %d and the cheap one's", spent, limit)
	}
	for _, m := range w.describe("slow").Members {
		if m.ID == slow && !m.TopicPatternStale {
			t.Fatalf("the slow pattern's member restored without being marked stale: %+v", m)
		}
	}
	for _, m := range w.describe("cheap").Members {
		if m.ID == cheap && m.TopicPatternStale {
			t.Fatalf("the cheap pattern's member restored stale: %+v", m)
		}
	}
	w.settle("cheap")
	if owners := w.owners("cheap"); len(owners) != 10 {
		t.Fatalf("the cheap pattern's group after the restore: %d partitions owned, want its 10", len(owners))
	}
}
