package group

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/capgate/capgate/internal/topicpattern"
)

// A topic_pattern is matched against every topic the machine knows, and
// a pattern within the default cost (topicpattern.DefaultMaxCost) takes
// ~20 ms over 10,000 names: inside the loop, one tenant rejoining its
// members with ever new patterns held every tenant's requests for that
// long each (review23). So the full match is done outside the loop: the
// shell matches a join's pattern against TopicNames — the machine's topic
// names at a version, readable outside the loop, as MemberTenants is —
// in the join's own goroutine (MatchTopics), and the join carries the
// result (Join.Matched). The machine takes it and matches only the topics
// added or deleted since that version (advance: the change log keeps the
// last topicChangesMax names); the result is the same set a full match
// over its topics gives now (TestPatternMatchIsAFullMatch). A join
// without one, or whose version the log no longer reaches, is matched in
// full in the loop as before: the simulation's joins, and a join that
// waited while thousands of topics came and went.

// topicChangesMax bounds TopicNames' change log: names added or deleted,
// newest last. A metadata read changes a few; a join is stepped within
// milliseconds of its match.
const topicChangesMax = 4096

// TopicNames is the machine's topic names (its topics' keys) at a
// version that grows by one with each change of the set, readable
// outside the loop. The machine writes it (updateTopics, Restore);
// request goroutines read it (MatchTopics). Safe for concurrent use.
type TopicNames struct {
	mu      sync.RWMutex
	version uint64
	names   []string // sorted; replaced at each change, never written in place
	changes []topicChange
	// floor: the log no longer holds changes of versions up to floor.
	floor uint64
}

// topicChange is a name added or deleted at version.
type topicChange struct {
	version uint64
	topic   string
}

func newTopicNames() *TopicNames { return &TopicNames{} }

// TopicNames is the machine's topic names, for matching outside the loop.
func (m *Machine) TopicNames() *TopicNames { return m.topicNames }

// Version is the version of the names now.
func (t *TopicNames) Version() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.version
}

// Len is how many names there are now.
func (t *TopicNames) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.names)
}

func (t *TopicNames) snapshot() (uint64, []string) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.version, t.names
}

// change records that added came and then deleted went (as the
// machine's topics were changed).
func (t *TopicNames) change(added, deleted []string) {
	if len(added) == 0 && len(deleted) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.version++
	gone := make(map[string]bool, len(deleted))
	for _, d := range deleted {
		gone[d] = true
	}
	names := make([]string, 0, len(t.names)+len(added))
	for _, n := range slices.Concat(t.names, added) {
		if !gone[n] {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	t.names = slices.Compact(names)
	for _, n := range slices.Concat(added, deleted) {
		t.changes = append(t.changes, topicChange{version: t.version, topic: n})
	}
	if over := len(t.changes) - topicChangesMax; over > 0 {
		t.floor = t.changes[over-1].version
		t.changes = slices.Delete(t.changes, 0, over)
	}
}

// since is every name added or deleted after version, and false when the
// log no longer reaches back to it.
func (t *TopicNames) since(version uint64) ([]string, uint64, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if version < t.floor || version > t.version {
		return nil, 0, false
	}
	i, _ := slices.BinarySearchFunc(t.changes, version+1, func(c topicChange, v uint64) int {
		return cmp.Compare(c.version, v)
	})
	out := make([]string, 0, len(t.changes)-i)
	for _, c := range t.changes[i:] {
		out = append(out, c.topic)
	}
	return out, t.version, true
}

// PatternMatch is the topics a join's topic_pattern matches among a
// machine's TopicNames at a version, worked out outside the loop
// (MatchTopics) and carried by the join (Join.Matched).
type PatternMatch struct {
	names   *TopicNames
	version uint64
	text    string
	matcher *topicpattern.Matcher
	cost    int      // topicpattern.Cost(text): the loop takes it, and matcher, as they are
	topics  []string // sorted
	// Work is what the matching cost, in topicpattern steps (a state of
	// the pattern's program visited at a character of a name; counted,
	// never timed) — the shell charges it to the tenant.
	Work int64
}

// TopicPatternStepsLimit names limits.topic_pattern_steps in a refusal's
// details.
const TopicPatternStepsLimit = "coordinator.groups.limits.topic_pattern_steps"

// StepsError is MatchTopics' refusal of a pattern whose match over the
// topic names took more than limits.topic_pattern_steps: the shell
// answers it 400 naming the limit (and charges the limit's work).
type StepsError struct {
	Limit  int // limits.topic_pattern_steps
	Topics int // the names it was matched against
}

func (e *StepsError) Error() string {
	return fmt.Sprintf("join: topic_pattern takes more than %d steps to match against the cluster's %d topics (%s): "+
		"a pattern that can skip ahead many ways, as (.?){60}x does, tries each way at every character of every name; "+
		"anchor it with literal text (orders-.*), or subscribe to a topic list", e.Limit, e.Topics, TopicPatternStepsLimit)
}

// Text is the pattern matched.
func (p *PatternMatch) Text() string { return p.text }

// Count is how many topics the pattern matched.
func (p *PatternMatch) Count() int { return len(p.topics) }

// Version is the TopicNames version matched against.
func (p *PatternMatch) Version() uint64 { return p.version }

// MatchTopics matches pattern (a join's topic_pattern, within limits:
// else the error, and the machine refuses the join as before) against
// every name of t now, with the step-counting topicpattern.Matcher,
// within limits.topic_pattern_steps (past it a *StepsError: the cost
// bound bounds the program, not the work of running it once per name —
// `(.?){60}x`, cost 245, fails slowly on every name, 1.1 s of a core
// over 10,000 40-character names; redteam18). It runs outside the loop,
// in the join's goroutine; it yields the processor every matchYieldSteps,
// so a costly pattern's matching shares the processors with the loop and
// other requests instead of holding one for tens of milliseconds.
func (t *TopicNames) MatchTopics(pattern string, limits Limits) (*PatternMatch, error) {
	cost, err := limits.checkPattern(pattern)
	if err != nil {
		return nil, err
	}
	sub, err := parseSubscription(nil, pattern)
	if err != nil {
		return nil, err
	}
	version, names := t.snapshot()
	p := &PatternMatch{names: t, version: version, text: pattern, matcher: sub.pattern, cost: cost}
	scan := sub.pattern.Scanner(limits.TopicPatternSteps)
	sinceYield := 0
	for _, n := range names {
		before := scan.Steps()
		if scan.Match(n) {
			p.topics = append(p.topics, n)
		}
		if sinceYield += scan.Steps() - before; sinceYield >= matchYieldSteps {
			sinceYield = 0
			runtime.Gosched()
		}
		if scan.Over() {
			return nil, &StepsError{Limit: limits.TopicPatternSteps, Topics: len(names)}
		}
	}
	p.Work = int64(scan.Steps())
	return p, nil
}

// Advance brings p up to its TopicNames' version now by matching only
// the names added or deleted since p's (the shell's cache of matches, as
// the machine does with a join's): a new PatternMatch whose Work is that
// matching's alone, p unchanged; false when the change log no longer
// reaches p's version.
func (p *PatternMatch) Advance() (*PatternMatch, bool) {
	changed, version, ok := p.names.since(p.version)
	if !ok {
		return nil, false
	}
	q := *p
	if q.Work = 0; version == p.version {
		return &q, true
	}
	_, names := p.names.snapshot()
	q.version = version
	q.topics, q.Work = p.advance(changed, func(n string) bool {
		_, found := slices.BinarySearch(names, n)
		return found
	})
	return &q, true
}

// advance is p's topics once the names in changed were added or deleted
// (present says which are names now), and the work of matching them.
func (p *PatternMatch) advance(changed []string, present func(string) bool) ([]string, int64) {
	// Unbounded: the change log holds at most topicChangesMax names,
	// and the pattern was within the steps bound over every name.
	scan := p.matcher.Scanner(math.MaxInt)
	drop, add := make(map[string]bool), make(map[string]bool)
	for _, n := range changed {
		if drop[n] || add[n] {
			continue
		}
		if present(n) && scan.Match(n) {
			add[n] = true
		} else {
			drop[n] = true
		}
	}
	out := make([]string, 0, len(p.topics)+len(add))
	for _, n := range p.topics {
		if !drop[n] && !add[n] {
			out = append(out, n)
		}
	}
	for n := range add {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, int64(scan.Steps())
}

// matchYieldSteps is how many topicpattern steps MatchTopics runs
// between two yields of the processor: ~0.1 ms.
const matchYieldSteps = 1 << 14

// matchBounded is the names (sorted) matcher matches, sorted, and the
// steps it took; over is set when it took more than maxSteps (then the
// names are not all matched: nothing else is to be made of them). The
// loop's own matching: a join without a match made outside the loop, a
// restore, topics added (topicsChanged) — counted and bounded as the
// joins' are (MatchTopics), never timed.
func matchBounded(matcher *topicpattern.Matcher, names []string, maxSteps int) (out []string, steps int, over bool) {
	scan := matcher.Scanner(maxSteps)
	for _, n := range names {
		if scan.Match(n) {
			out = append(out, n)
		}
		if scan.Over() {
			return nil, scan.Steps(), true
		}
	}
	return out, scan.Steps(), false
}

// matchesOf sets sub's matches (a pattern subscription's topics among the
// machine's now, sorted): from hint when it was matched against this
// machine's names at a version the change log still reaches and for
// this pattern — only the names changed since are matched here — else
// by matching every name within limits.topic_pattern_steps, as
// MatchTopics does (a *StepsError past it: a join is refused, a restored
// member keeps the topics it holds and is marked, restoreGroups). A topic list has
// none.
func (m *Machine) matchesOf(sub *subscription, hint *PatternMatch) error {
	if sub.pattern == nil || sub.matched {
		return nil
	}
	if m.fromHint(hint, sub.patternText) {
		if changed, _, ok := m.topicNames.since(hint.version); ok {
			var steps int64
			sub.matched = true
			sub.matches, steps = hint.advance(changed, func(n string) bool {
				_, ok := m.topics[n]
				return ok
			})
			m.patternSteps += steps
			return nil
		}
	}
	_, names := m.topicNames.snapshot()
	matches, steps, over := matchBounded(sub.pattern, names, m.cfg.Limits.TopicPatternSteps)
	if m.patternSteps += int64(steps); over {
		return &StepsError{Limit: m.cfg.Limits.TopicPatternSteps, Topics: len(names)}
	}
	sub.matches, sub.matched = matches, true
	return nil
}

// fromHint reports whether hint (a join's Matched) was made from this
// machine's topic names for pattern text: the loop then takes its
// compiled pattern, cost and matches instead of working them out again.
func (m *Machine) fromHint(hint *PatternMatch, text string) bool {
	return hint != nil && hint.names == m.topicNames && hint.text == text && text != ""
}
