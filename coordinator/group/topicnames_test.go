package group

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/topicpattern"
)

// TestPatternMatchIsAFullMatch: whatever way a pattern member's topics
// are found — a full match outside the loop at a version, brought up to
// date in the loop with only the names changed since (Join.Matched), a
// match that the change log no longer reaches (matched again in full),
// no match at all (the simulation's joins), the shell's cache advanced
// (PatternMatch.Advance), topics added and deleted after the join
// (topicsChanged) — they are exactly the topics a direct MatchString
// over the machine's topics gives, over random topics and patterns.
// TopicNames is the machine's topics' keys throughout.
func TestPatternMatchIsAFullMatch(t *testing.T) {
	pieces := []string{"a", "b", "-", "0", ".", ".*", "[ab]", "[a-]+", "(a|b)", "1?", "(ab)*", "[^-]", "b{2}"}
	for seed := uint64(1); seed <= 120; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		cfg := DefaultConfig()
		cfg.InitialAssignDelay = 0 // a join into the empty group answered at once
		m, err := New(cfg, rand.New(rand.NewPCG(seed, 1)))
		if err != nil {
			t.Fatal(err)
		}
		now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		var ref Ref
		step := func(ev Event) Ready {
			now = now.Add(time.Millisecond)
			m.Step(now, ev)
			rd, err := m.Ready()
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			m.Advance()
			return rd
		}
		name := func() string {
			var b strings.Builder
			for range 1 + rng.IntN(5) {
				b.WriteByte("ab-01"[rng.IntN(5)])
			}
			return b.String()
		}
		churn := func(n int) {
			e := Topics{Partitions: map[string]int32{}}
			known := sortedKeys(m.topics)
			for range n {
				if len(known) > 0 && rng.IntN(3) == 0 {
					e.Deleted = append(e.Deleted, known[rng.IntN(len(known))])
				} else {
					e.Partitions[name()] = 1
				}
			}
			step(e)
			if got, want := m.topicNames.names, sortedKeys(m.topics); !slices.Equal(got, want) {
				t.Fatalf("seed %d: topic names %v, the machine's topics %v", seed, got, want)
			}
		}
		pattern := func() string {
			var b strings.Builder
			for range 1 + rng.IntN(4) {
				b.WriteString(pieces[rng.IntN(len(pieces))])
			}
			return b.String()
		}
		direct := func(p string) []string {
			re, err := CompileTopicPattern(p)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, n := range sortedKeys(m.topics) {
				if re.MatchString(n) {
					out = append(out, n)
				}
			}
			return out
		}
		resolved := func(id string) []string {
			return slices.Sorted(func(yield func(string) bool) {
				for n := range m.groups["g"].members[id].resolved {
					if !yield(n) {
						return
					}
				}
			})
		}
		check := func(what, p string, got []string) {
			t.Helper()
			if want := direct(p); !slices.Equal(got, want) {
				t.Fatalf("seed %d, %s of %q: %v, a full match gives %v", seed, what, p, got, want)
			}
		}
		join := func(id, p string, hint *PatternMatch) string {
			ref++
			rd := step(Join{Ref: ref, Group: "g", MemberID: id, ClientID: "c", Credential: Credential{ID: "a"}, TopicPattern: p, Matched: hint})
			for _, msg := range rd.Messages {
				if r, ok := msg.(JoinReply); ok && r.Ref == ref {
					return r.MemberID
				}
			}
			t.Fatalf("seed %d: join with %q refused: %+v", seed, p, rd.Messages)
			return ""
		}

		churn(rng.IntN(60))
		var id string
		for round := range 4 {
			p := pattern()
			hint, err := m.TopicNames().MatchTopics(p, m.cfg.Limits)
			if err != nil {
				t.Fatalf("seed %d: %q: %v", seed, p, err)
			}
			check("a match outside the loop", p, hint.topics)
			switch rng.IntN(5) {
			case 0: // joined at once
			case 1: // the log no longer reaches the match's version
				for range 1 + topicChangesMax/64 {
					churn(64)
				}
			case 2:
				hint = nil // no match carried (the simulation's joins)
			default:
				for range 1 + rng.IntN(3) {
					churn(rng.IntN(20))
				}
			}
			if hint != nil {
				if adv, ok := hint.Advance(); ok {
					check("the cache's match brought up to date", p, adv.topics)
				}
			}
			if round == 0 || rng.IntN(2) == 0 {
				id = join(id, p, hint) // a new member, then rejoins changing the pattern
			} else {
				id = join("", p, hint) // another member of the group
			}
			check("a member's resolution", p, resolved(id))
			churn(rng.IntN(20))
			check("a member's resolution after topics came and went", p, resolved(id))
			if err := m.CheckInvariants(); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
	}
}

// TestTopicChangeLogIsBounded: the change log keeps topicChangesMax names
// at most, and a version it no longer reaches is said so.
func TestTopicChangeLogIsBounded(t *testing.T) {
	tn := newTopicNames()
	tn.change([]string{"first"}, nil)
	for i := range topicChangesMax {
		tn.change([]string{fmt.Sprintf("t%d", i)}, nil)
	}
	if len(tn.changes) > topicChangesMax {
		t.Fatalf("%d changes kept, at most %d", len(tn.changes), topicChangesMax)
	}
	if _, _, ok := tn.since(0); ok {
		t.Fatal("the log reached version 0 after its first change was dropped")
	}
	changed, version, ok := tn.since(1)
	if !ok || len(changed) != topicChangesMax || version != topicChangesMax+1 {
		t.Fatalf("since version 1: %d names, version %d, %t; want %d, %d, true", len(changed), version, ok, topicChangesMax, topicChangesMax+1)
	}
}

// TestPatternMatchingWorkIsBounded: a topic_pattern within the cost
// bound whose every match fails after trying every way through it —
// `(.?){60}x`, 9 bytes, cost 245: 1.1 s of a core per match over 10,000
// names (redteam18) — is refused by MatchTopics past
// limits.topic_pattern_steps (a *StepsError naming it, which the shell
// answers 400), counted in steps, not timed; what people write is
// matched as before and its work (steps) is in the match for the shell
// to charge.
func TestPatternMatchingWorkIsBounded(t *testing.T) {
	m, err := New(DefaultConfig(), rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("team-%04d.service-events.orders-v%d", i, i%7)
	}
	m.TopicNames().change(names, nil)
	limits := DefaultLimits()
	p, err := m.TopicNames().MatchTopics(`team-00[0-9]{2}\..*`, limits)
	if err != nil || p.Count() != 100 || p.Work <= 0 {
		t.Fatalf("a pattern matching 100 topics: %v, %v", p, err)
	}
	attack := `(.?){60}x`
	if c := topicpattern.Cost(attack); c > limits.TopicPatternCost {
		t.Fatalf("cost %d: past the cost bound already", c)
	}
	_, err = m.TopicNames().MatchTopics(attack, limits)
	var over *StepsError
	if !errors.As(err, &over) || over.Limit != limits.TopicPatternSteps || !strings.Contains(err.Error(), TopicPatternStepsLimit) {
		t.Fatalf("matching %s over 1,000 topics: %v; want a StepsError naming %s", attack, err, TopicPatternStepsLimit)
	}
}
