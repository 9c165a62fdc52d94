package group

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// loopMatchWorld is a machine with topics, stepped by hand.
type loopMatchWorld struct {
	t   *testing.T
	m   *Machine
	now time.Time
	ref Ref
}

func newLoopMatchWorld(t *testing.T, steps int, topics []string) *loopMatchWorld {
	t.Helper()
	cfg := DefaultConfig()
	cfg.InitialAssignDelay = 0
	cfg.Limits.TopicPatternSteps = steps
	cfg.Limits.TopicPatternsPerTenant = 1000 // the tests' subject is the steps
	m, err := New(cfg, rand.New(rand.NewPCG(7, 8)))
	if err != nil {
		t.Fatal(err)
	}
	w := &loopMatchWorld{t: t, m: m, now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	w.addTopics(topics...)
	return w
}

func (w *loopMatchWorld) step(ev Event) Ready {
	w.t.Helper()
	w.now = w.now.Add(time.Millisecond)
	w.m.Step(w.now, ev)
	rd, err := w.m.Ready()
	if err != nil {
		w.t.Fatal(err)
	}
	w.m.Advance()
	return rd
}

func (w *loopMatchWorld) addTopics(names ...string) {
	w.t.Helper()
	e := Topics{Partitions: maps.Clone(w.m.topics)}
	for _, n := range names {
		e.Partitions[n] = 1
	}
	w.step(e)
}

// join joins group g as tenant's member with pattern (matched outside
// the loop first when hinted) and returns the reply's member id, or the
// rejection.
func (w *loopMatchWorld) join(g, tenant, memberID, pattern string, hinted bool) (string, *Rejected) {
	w.t.Helper()
	w.ref++
	e := Join{Ref: w.ref, Group: g, MemberID: memberID, ClientID: "c", TopicPattern: pattern,
		Credential: Credential{ID: tenant}, Tenant: tenant}
	if hinted {
		p, err := w.m.TopicNames().MatchTopics(pattern, w.m.cfg.Limits)
		if err != nil {
			w.t.Fatalf("matching %q outside the loop: %v", pattern, err)
		}
		e.Matched = p
	}
	rd := w.step(e)
	for _, msg := range rd.Messages {
		switch r := msg.(type) {
		case JoinReply:
			if r.Ref == w.ref {
				return r.MemberID, nil
			}
		case Rejected:
			if r.Ref == w.ref {
				return "", &r
			}
		}
	}
	w.t.Fatalf("join %s %q: no answer", g, pattern)
	return "", nil
}

func (w *loopMatchWorld) member(g, id string) *member {
	w.t.Helper()
	mem := w.m.memberOf(g, id)
	if mem == nil {
		w.t.Fatalf("%s/%s: no such member", g, id)
	}
	return mem
}

func topicList(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("team-%04d.service-events", i)
	}
	return out
}

// TestTopicChangeMatchingIsBoundedPerTenant: the loop matches the topics
// a metadata read adds against every live pattern member's pattern, once
// per tenant and text. One tenant holding many members with distinct
// patterns made every topic change cost the loop — every tenant's
// requests — its patterns × the added topics. Now a tenant's patterns
// together take at most limits.topic_pattern_steps per change: A's
// members whose patterns its budget does not cover are marked stale
// (describe says so), keep what they had and follow no new topic; B, in
// the same change, is matched as before; a stale member's rejoin matches
// its pattern again.
func TestTopicChangeMatchingIsBoundedPerTenant(t *testing.T) {
	const limit = 100_000
	// Each of A's patterns is ~3 steps a character: ~15,000 over the 200
	// topics it joined with, within the bound; 40 of them over the 140
	// (shorter) topics added are ~170,000.
	w := newLoopMatchWorld(t, limit, topicList(200))
	var ids []string
	for i := range 40 {
		id, rej := w.join("ga", "tenant-a", "", fmt.Sprintf(`.*z%02d.*`, i), i%2 == 0)
		if rej != nil {
			t.Fatalf("A's join %d: %v", i, rej.Message)
		}
		ids = append(ids, id)
	}
	b, rej := w.join("gb", "tenant-b", "", `new-[0-9]+-b`, false)
	if rej != nil {
		t.Fatalf("B's join: %v", rej.Message)
	}
	var added []string
	for i := range 100 {
		added = append(added, fmt.Sprintf("new-%03d-b", i))
	}
	for i := range 40 {
		added = append(added, fmt.Sprintf("new-z%02d", i))
	}
	before := w.m.patternSteps
	w.addTopics(added...)
	spent := w.m.patternSteps - before
	// B's pattern over the 140 added names costs a few thousand.
	if spent > limit+20_000 {
		t.Errorf("the topic change matched %d steps in the loop; want A's at most %d (limits.topic_pattern_steps) and B's", spent, limit)
	}
	if mem := w.member("gb", b); mem.patternStale || len(mem.resolved) != 100 {
		t.Errorf("B's member: stale %v, %d topics; want all 100 new-*-b", mem.patternStale, len(mem.resolved))
	}
	stale, fresh := 0, 0
	for i, id := range ids {
		mem := w.member("ga", id)
		want := fmt.Sprintf("new-z%02d", i)
		switch {
		case mem.patternStale:
			stale++
			if len(mem.resolved) != 0 {
				t.Errorf("A's stale member %d follows %v", i, slices.Collect(maps.Keys(mem.resolved)))
			}
			if !w.m.describeMember(mem).TopicPatternStale {
				t.Errorf("A's stale member %d: describe does not say so", i)
			}
		case !mem.resolved[want]:
			t.Errorf("A's member %d, not stale, did not take %s", i, want)
		default:
			fresh++
		}
	}
	if stale == 0 || fresh == 0 {
		t.Fatalf("A's members: %d stale, %d matched; want some of each (the budget covers some of A's 40 patterns)", stale, fresh)
	}
	// A stale member's rejoin matches its pattern again.
	for i, id := range ids {
		if mem := w.member("ga", id); mem.patternStale {
			if _, rej := w.join("ga", "tenant-a", id, fmt.Sprintf(`.*z%02d.*`, i), true); rej != nil {
				t.Fatalf("stale member %d's rejoin: %v", i, rej.Message)
			}
			if mem.patternStale || !mem.resolved[fmt.Sprintf("new-z%02d", i)] {
				t.Fatalf("stale member %d after its rejoin: stale %v, topics %v", i, mem.patternStale, slices.Collect(maps.Keys(mem.resolved)))
			}
			break
		}
	}
	if err := w.m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestLoopMatchIsBounded: a join whose pattern was not matched outside
// the loop (a join without Join.Matched, or one the change log no longer
// reaches) is matched in the loop within limits.topic_pattern_steps, as
// MatchTopics bounds it: past it refused 400 naming the limit, nothing
// changed; within it admitted.
func TestLoopMatchIsBounded(t *testing.T) {
	const limit = 50_000
	w := newLoopMatchWorld(t, limit, topicList(1000))
	before := w.m.patternSteps
	if _, rej := w.join("g", "tenant-a", "", `(.?){60}x`, false); rej == nil || rej.Code != "bad_request" {
		t.Fatalf("a join of (.?){60}x matched in the loop: %+v; want 400 naming %s", rej, TopicPatternStepsLimit)
	} else if spent := w.m.patternSteps - before; spent > limit+limit/10 {
		t.Fatalf("the refused join matched %d steps in the loop; at most %d", spent, limit)
	}
	if w.m.groups["g"] != nil && len(w.m.groups["g"].members) > 0 {
		t.Fatal("the refused join left a member")
	}
	if _, rej := w.join("g", "tenant-a", "", `team-000[0-9]\..*`, false); rej != nil {
		t.Fatalf("a cheap pattern: %v", rej.Message)
	}
}

// TestJoinTakesTheMatchersPattern: a join carrying its match (Matched)
// is taken with the pattern compiled outside the loop and its cost, not
// parsed and compiled again in the loop (checkPattern, parseSubscription).
func TestJoinTakesTheMatchersPattern(t *testing.T) {
	w := newLoopMatchWorld(t, DefaultLimits().TopicPatternSteps, topicList(100))
	p, err := w.m.TopicNames().MatchTopics(`team-00[0-4][0-9]\..*`, w.m.cfg.Limits)
	if err != nil {
		t.Fatal(err)
	}
	w.ref++
	rd := w.step(Join{Ref: w.ref, Group: "g", ClientID: "c", TopicPattern: p.Text(), Credential: Credential{ID: "a"}, Matched: p})
	var id string
	for _, msg := range rd.Messages {
		if r, ok := msg.(JoinReply); ok {
			id = r.MemberID
		}
	}
	mem := w.member("g", id)
	if mem.pattern != p.matcher || mem.patternCost != p.cost || len(mem.resolved) != 50 {
		t.Fatalf("member: pattern %p (the match's %p), cost %d (%d), %d topics (want 50)", mem.pattern, p.matcher, mem.patternCost, p.cost, len(mem.resolved))
	}
}

// TestUnchangedTopicsCostNothing: the shell sends every topic at each
// metadata read (every metadata_interval); with nothing changed the loop
// allocates nothing and sorts nothing (all topics' names were sorted each
// time: ~ms at 10,000 topics).
func TestUnchangedTopicsCostNothing(t *testing.T) {
	w := newLoopMatchWorld(t, DefaultLimits().TopicPatternSteps, topicList(10_000))
	e := Topics{Partitions: maps.Clone(w.m.topics)}
	if allocs := testing.AllocsPerRun(5, func() { w.m.updateTopics(e) }); allocs != 0 {
		t.Fatalf("an unchanged metadata read of 10,000 topics: %v allocations in the loop; want 0", allocs)
	}
}

// TestTopicListAsAlternationIsWithinTheBounds: a 30-name alternation
// (~480 bytes, cost ~450) passes the cost bound counted beyond its
// length, and matching it over 10,000 topics takes a small part of
// topic_pattern_steps; the short patterns that expand, which the cost
// bound is for, are refused as before.
func TestTopicListAsAlternationIsWithinTheBounds(t *testing.T) {
	var names []string
	for _, w := range []string{"orders", "payments", "invoices", "refunds", "shipments", "returns", "customers", "accounts", "ledger", "audit",
		"inventory", "pricing", "catalog", "reviews", "sessions", "clicks", "searches", "carts", "checkouts", "coupons",
		"loyalty", "notices", "emails", "texts", "pushes", "fraud", "risks", "identity", "payouts", "settles"} {
		names = append(names, w+"-events")
	}
	pattern := "(" + strings.Join(names, "|") + ")"
	limits := DefaultLimits()
	cost, err := limits.checkPattern(pattern)
	if err != nil || cost <= limits.TopicPatternCost {
		t.Fatalf("%d bytes, cost %d: %v; want admitted, at a cost past %d", len(pattern), cost, err, limits.TopicPatternCost)
	}
	w := newLoopMatchWorld(t, limits.TopicPatternSteps, append(topicList(10_000), names...))
	p, err := w.m.TopicNames().MatchTopics(pattern, limits)
	if err != nil || p.Count() != 30 || p.Work > int64(limits.TopicPatternSteps/4) {
		t.Fatalf("matched over 10,000 topics: %v, %v; want 30 topics within a quarter of %d steps", p, err, limits.TopicPatternSteps)
	}
	t.Logf("%d bytes, cost %d, %d steps over %d topics", len(pattern), cost, p.Work, w.m.TopicNames().Len())
	for _, p := range []string{`(.?){1000}`, `(.?){250}`, `([a-z]?){100}`, `(a{20}){20}`, strings.Repeat(`\pL`, 170), `\pL\pL\pL\pL`} {
		if _, err := limits.checkPattern(p); err == nil {
			t.Errorf("%q admitted", p)
		}
	}
}
