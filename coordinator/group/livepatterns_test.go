package group

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/capgate/capgate/api"
)

// TestTopicPatternsPerTenantAreBounded: each distinct pattern text is
// matched on its own at every topic change and restore, so a tenant's
// live members hold at most limits.topic_patterns_per_tenant of them: a
// join bringing one more is refused 409 limit_exceeded naming the limit,
// and changes nothing; a text the tenant holds already, another tenant's
// join, and a rejoin replacing a member's own last text are not; a place
// comes back when a text's last member leaves.
func TestTopicPatternsPerTenantAreBounded(t *testing.T) {
	w := newLoopMatchWorld(t, 1<<20, topicList(20))
	w.m.cfg.Limits.TopicPatternsPerTenant = 3
	var ids []string
	for i := range 3 {
		id, rej := w.join("ga", "tenant-a", "", fmt.Sprintf(`team-%04d\..*`, i), false)
		if rej != nil {
			t.Fatalf("A's join %d: %v", i, rej.Message)
		}
		ids = append(ids, id)
	}
	_, rej := w.join("ga", "tenant-a", "", `team-0003\..*`, true)
	if rej == nil || rej.Code != api.CodeLimitExceeded || rej.Details["limit"] != TopicPatternsLimit {
		t.Fatalf("A's fourth distinct pattern: %+v; want 409 limit_exceeded naming %s", rej, TopicPatternsLimit)
	}
	if n := len(w.m.groups["ga"].members); n != 3 {
		t.Fatalf("the refused join changed the group: %d members", n)
	}
	if _, rej := w.join("ga", "tenant-a", "", `team-0001\..*`, false); rej != nil {
		t.Errorf("A's join with a pattern it holds: %v", rej.Message)
	}
	if _, rej := w.join("gb", "tenant-b", "", `team-0003\..*`, false); rej != nil {
		t.Errorf("B's join: %v", rej.Message)
	}
	// ids[0]'s text is its own alone: a rejoin with another replaces it.
	if _, rej := w.join("ga", "tenant-a", ids[0], `team-001[0-9]\..*`, false); rej != nil {
		t.Errorf("A's member rejoining with a new pattern in place of its own: %v", rej.Message)
	}
	// ids[1]'s text is held by another member too: a new one would be a fourth.
	if _, rej := w.join("ga", "tenant-a", ids[1], `team-0019\..*`, false); rej == nil || rej.Code != api.CodeLimitExceeded {
		t.Errorf("A's member rejoining with a fourth text while its own stays held: %+v; want 409", rej)
	}
	w.step(Leave{Ref: 900, Group: "ga", MemberID: ids[2]})
	if _, rej := w.join("ga", "tenant-a", "", `team-0019\..*`, false); rej != nil {
		t.Errorf("A's join once a text's last member left: %v", rej.Message)
	}
	if err := w.m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestTopicHitsMadeOutsideTheLoop: the topics a metadata read adds are
// matched against the live patterns outside the loop (MatchAdded) and the
// loop takes those hits as they are — none of its own steps — and the
// members end as a loop that matched everything itself leaves them (a
// twin machine stepped alike, random patterns of several tenants,
// several changes). Hits made at another version (another change came
// first) are not taken: the loop matches, and the result is the same.
func TestTopicHitsMadeOutsideTheLoop(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		twins := [2]*loopMatchWorld{newLoopMatchWorld(t, 1<<24, topicList(30)), newLoopMatchWorld(t, 1<<24, topicList(30))}
		pieces := []string{`team-00`, `.*`, `[0-9]`, `new-`, `(a|b)`, `-x`, `.`, `\.service`, `z?`}
		for i := range 12 {
			pattern := ""
			for range 1 + rng.IntN(4) {
				pattern += pieces[rng.IntN(len(pieces))]
			}
			tenant := fmt.Sprintf("tenant-%d", rng.IntN(3))
			for _, w := range twins {
				if _, rej := w.join(fmt.Sprintf("g%d", i%4), tenant, "", pattern, false); rej != nil {
					t.Fatalf("seed %d: join %q: %v", seed, pattern, rej.Message)
				}
			}
		}
		var stale *TopicHits
		for change := range 4 {
			counts := maps.Clone(twins[0].m.topics)
			for j := range 1 + rng.IntN(20) {
				counts[fmt.Sprintf("new-%c%d.service-x%d", 'a'+rng.IntN(3), change, j)] = 1
			}
			hits := twins[0].m.LivePatterns().MatchAdded(twins[0].m.TopicNames(), counts, twins[0].m.cfg.Limits)
			if change == 3 {
				hits = stale // made before change 2: the loop matches
			}
			before := twins[0].m.patternSteps
			twins[0].step(Topics{Partitions: counts, Hits: hits})
			twins[1].step(Topics{Partitions: maps.Clone(counts)})
			if spent := twins[0].m.patternSteps - before; change < 3 && spent != 0 {
				t.Fatalf("seed %d change %d: the loop matched %d steps beside the hits made outside it", seed, change, spent)
			}
			if change == 1 {
				stale = hits
			}
			for name, g := range twins[1].m.groups {
				for id, want := range g.members {
					got := twins[0].m.groups[name].members[id]
					if !maps.Equal(got.resolved, want.resolved) || got.patternStale != want.patternStale {
						t.Fatalf("seed %d change %d: %s/%s with hits %v stale %v; matched in the loop %v stale %v", seed, change, name, id,
							slices.Sorted(maps.Keys(got.resolved)), got.patternStale, slices.Sorted(maps.Keys(want.resolved)), want.patternStale)
					}
				}
			}
			if err := twins[0].m.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
