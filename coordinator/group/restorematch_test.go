package group_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/group"
)

// TestRestoreMatchIsBounded: a restore (a restart, a takeover) matches
// each distinct pattern of the restored members again, in the loop
// before it serves; every pattern was within limits.topic_pattern_steps
// when it joined, but the topics may have grown since (here: the bound
// was lowered). A pattern over the bound now is matched no further than
// the bound: its members restore with no topics but those of the
// partitions they hold (none here), marked stale (describe
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

// TestRestoreTakesAPatternThatNoLongerParses: a pattern is parsed alone
// before it is anchored now (topicpattern.Parse); one stored before, as
// `x)|(?:.*` (which escaped the anchors and matched every topic), no
// longer compiles. The restore (a takeover) must not fail for it: its
// member restores matching nothing, marked stale until it rejoins, and
// the others as they were.
func TestRestoreTakesAPatternThatNoLongerParses(t *testing.T) {
	w := newWorld(t)
	member := func(id, pattern string) group.MemberRecord {
		return group.MemberRecord{Group: "g", MemberID: id, ClientID: "c", TopicPattern: pattern,
			SessionTimeout: 10 * time.Second, Credential: group.Credential{ID: "a"}}
	}
	snap := group.Snapshot{
		Topics:  []group.TopicRecord{{Topic: "orders", Partitions: 1}, {Topic: "payments", Partitions: 1}},
		Members: []group.MemberRecord{member("escaped", `x)|(?:.*`), member("fine", `ord.*`)},
	}
	m, err := group.Restore(w.cfg, rand.New(rand.NewPCG(3, 4)), snap, w.now)
	if err != nil {
		t.Fatalf("restore with a stored pattern that no longer parses: %v", err)
	}
	w.m = m
	for _, d := range w.describe("g").Members {
		switch {
		case d.ID == "escaped" && (!d.TopicPatternStale || d.TopicPatternMatches != 0):
			t.Errorf("the escaping pattern's member restored: %+v, want stale with no topic", d)
		case d.ID == "fine" && (d.TopicPatternStale || d.TopicPatternMatches != 1):
			t.Errorf("the other member restored: %+v, want its one topic", d)
		}
	}
}

// TestRestoreMatchIsBoundedPerTenant: a restore (a takeover: nobody is
// served until it ends) matched each distinct pattern text within
// limits.topic_pattern_steps, so tenant A holding 40 distinct costly
// patterns cost every tenant's takeover 40 × the bound. Now each
// tenant's texts share 4 × the bound: A's past it restore stale with no
// topics (until they rejoin), and B's pattern, restored after A's, is
// matched as before.
func TestRestoreMatchIsBoundedPerTenant(t *testing.T) {
	w := newWorld(t, func(cfg *group.Config) { cfg.Limits.TopicPatternsPerTenant = 100 })
	topics := map[string]int32{}
	for i := range 1000 {
		topics[fmt.Sprintf("team-%04d.service-events", i)] = 1
	}
	w.topics(topics)
	join := func(g, tenant, pattern string) string {
		ref := w.nextRef()
		w.step(group.Join{Ref: ref, Group: g, ClientID: "c", TopicPattern: pattern, Credential: group.Credential{ID: tenant}})
		return mustReply[group.JoinReply](t, w, ref).MemberID
	}
	// ~60 steps a name each: ~60,000 over the 1,000 topics.
	for i := range 40 {
		join("ga", "a", fmt.Sprintf(`.*z%02d.*`, i))
	}
	b := join("gz", "b", `team-000[0-9]\..*`)
	const limit = 100_000
	w.cfg.Limits.TopicPatternSteps = limit
	w.restart(0)
	// B's pattern reads ~8 characters of each name: ~8,500 steps.
	if spent := w.m.PatternSteps(); spent > 4*limit+limit/5 {
		t.Fatalf("the restore matched %d steps; want A's at most %d (4 × topic_pattern_steps) and B's", spent, 4*limit)
	}
	stale := 0
	for _, m := range w.describe("ga").Members {
		if m.TopicPatternStale {
			stale++
		}
	}
	if stale == 0 || stale == 40 {
		t.Errorf("%d of A's 40 members restored stale; want those past A's budget only", stale)
	}
	for _, m := range w.describe("gz").Members {
		if m.ID == b && (m.TopicPatternStale || m.TopicPatternMatches != 10) {
			t.Fatalf("B's member restored %+v; want its 10 topics", m)
		}
	}
}
