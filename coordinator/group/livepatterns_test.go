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
		twins := patternTwins(t, seed, rng)
		var stale *TopicHits
		for change := range 4 {
			counts := maps.Clone(twins[0].m.topics)
			for j := range 1 + rng.IntN(20) {
				counts[fmt.Sprintf("new-%c%d.service-x%d", 'a'+rng.IntN(3), change, j)] = 1
			}
			hits := twins[0].m.LivePatterns().MatchAdded(twins[0].m.TopicNames(), counts, twins[0].m.cfg.Limits, allFirst)
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

// allFirst matches every tenant's texts in MatchAdded's first pass.
func allFirst(string, int64) int { return FirstPassAll }

// TestDeferredTopicHitsEndAsTheLoopsMatch: a tenant whose texts take
// more than its first pass is deferred — the change goes in without
// touching its members (neither new topics nor stale), and its matches,
// made after (MatchDeferred) and stepped as DeferredHits, leave the
// members as a loop that matched everything at the change leaves them
// (a twin machine; random patterns of several tenants, random first
// passes, several changes, one deferred tenant's hits coming after the
// next change and one after a deletion of what they matched).
func TestDeferredTopicHitsEndAsTheLoopsMatch(t *testing.T) {
	deferredSome := false
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 11))
		twins := patternTwins(t, seed, rng)
		first := map[string]int{}
		for k := range 3 {
			first[fmt.Sprintf("tenant-%d", k)] = []int{0, 40, 400, FirstPassAll}[rng.IntN(4)]
		}
		var late []*TopicHits // a change's deferred hits, stepped after the next change
		for change := range 4 {
			counts := maps.Clone(twins[0].m.topics)
			for j := range 1 + rng.IntN(20) {
				counts[fmt.Sprintf("new-%c%d.service-x%d", 'a'+rng.IntN(3), change, j)] = 1
			}
			hits := twins[0].m.LivePatterns().MatchAdded(twins[0].m.TopicNames(), counts, twins[0].m.cfg.Limits,
				func(tenant string, _ int64) int { return first[tenant] })
			before := snapshotResolved(twins[0].m)
			twins[0].step(Topics{Partitions: counts, Hits: hits})
			twins[1].step(Topics{Partitions: maps.Clone(counts)})
			for _, tenant := range hits.Deferred() {
				deferredSome = true
				for _, mem := range membersOf(twins[0].m, tenant) {
					if !maps.Equal(mem.resolved, before[mem]) || mem.patternStale {
						t.Fatalf("seed %d change %d: deferred tenant %s's member %s changed at the change: %v", seed, change, tenant, mem.id,
							slices.Sorted(maps.Keys(mem.resolved)))
					}
				}
			}
			if change == 2 {
				// what change 1's late hits matched, some of it deleted
				// before they come: a deleted topic is not taken.
				gone := slices.Sorted(maps.Keys(counts))[:3]
				for _, w := range twins {
					w.step(Topics{Deleted: gone})
				}
			}
			for _, th := range late {
				twins[0].step(DeferredHits{Hits: th})
			}
			late = late[:0]
			for _, tenant := range hits.Deferred() {
				th := hits.MatchDeferred(tenant, twins[0].m.cfg.Limits, false)
				if change%2 == 0 {
					twins[0].step(DeferredHits{Hits: th})
				} else {
					late = append(late, th)
				}
			}
		}
		for _, th := range late {
			twins[0].step(DeferredHits{Hits: th})
		}
		for name, g := range twins[1].m.groups {
			for id, want := range g.members {
				got := twins[0].m.groups[name].members[id]
				if !maps.Equal(got.resolved, want.resolved) || got.patternStale != want.patternStale {
					t.Fatalf("seed %d: %s/%s with deferred hits %v stale %v; matched in the loop %v stale %v", seed, name, id,
						slices.Sorted(maps.Keys(got.resolved)), got.patternStale, slices.Sorted(maps.Keys(want.resolved)), want.patternStale)
				}
			}
		}
		if err := twins[0].m.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	if !deferredSome {
		t.Fatal("no tenant was deferred: the test tests nothing")
	}
}

func snapshotResolved(m *Machine) map[*member]map[string]bool {
	out := map[*member]map[string]bool{}
	for _, g := range m.groups {
		for _, mem := range g.members {
			out[mem] = maps.Clone(mem.resolved)
		}
	}
	return out
}

func membersOf(m *Machine, tenant string) []*member {
	var out []*member
	for _, g := range m.groups {
		for _, mem := range g.members {
			if mem.pattern != nil && mem.credential.tenant() == tenant {
				out = append(out, mem)
			}
		}
	}
	return out
}

// patternTwins is two machines alike, each with the same 12 members of
// random patterns of three tenants in four groups, drawn from rng.
func patternTwins(t *testing.T, seed uint64, rng *rand.Rand) [2]*loopMatchWorld {
	t.Helper()
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
	return twins
}
