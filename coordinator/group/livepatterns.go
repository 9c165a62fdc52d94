package group

import (
	"cmp"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/topicpattern"
)

// LivePatterns is the distinct topic_pattern texts of the live pattern
// members, per tenant (Credential.tenant), with how many members hold
// each and how many of those are not stale, readable outside the loop as
// MemberTenants is. The machine keeps it in resolve and unresolve (joins,
// rejoins, restores, leaves, expiries) and as a topic change marks a
// member stale; the shell reads it to match a metadata read's new topics
// before the loop takes them (MatchAdded), and the machine counts a
// tenant's texts against limits.topic_patterns_per_tenant. Safe for
// concurrent use: the loop writes, request goroutines read.
type LivePatterns struct {
	mu      sync.RWMutex
	tenants map[string]map[string]*livePattern
}

// livePattern is one tenant's pattern text: compiled, and its members.
type livePattern struct {
	matcher *topicpattern.Matcher
	members int // live members of the tenant with this text
	fresh   int // of them, not stale: those a topic change matches for
}

func newLivePatterns() *LivePatterns {
	return &LivePatterns{tenants: make(map[string]map[string]*livePattern)}
}

// LivePatterns is the machine's index of its live members' patterns, for
// reads outside the loop.
func (m *Machine) LivePatterns() *LivePatterns { return m.livePatterns }

// add counts mem (a pattern member now resolved) under its text.
func (l *LivePatterns) add(mem *member) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tenant := mem.credential.tenant()
	texts := l.tenants[tenant]
	if texts == nil {
		texts = make(map[string]*livePattern)
		l.tenants[tenant] = texts
	}
	p := texts[mem.patternText]
	if p == nil {
		p = &livePattern{matcher: mem.pattern}
		texts[mem.patternText] = p
	}
	p.members++
	if !mem.patternStale {
		p.fresh++
	}
}

// remove undoes add for mem (as it was when added, or staled since).
func (l *LivePatterns) remove(mem *member) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tenant := mem.credential.tenant()
	p := l.tenants[tenant][mem.patternText]
	if p == nil {
		panic(fmt.Sprintf("group: live patterns: member %q's pattern %q of tenant %q not counted", mem.id, mem.patternText, tenant))
	}
	p.members--
	if !mem.patternStale {
		p.fresh--
	}
	if p.members == 0 {
		delete(l.tenants[tenant], mem.patternText)
		if len(l.tenants[tenant]) == 0 {
			delete(l.tenants, tenant)
		}
	}
}

// staled records that mem, counted fresh, became stale.
func (l *LivePatterns) staled(mem *member) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tenants[mem.credential.tenant()][mem.patternText].fresh--
}

// Texts is how many distinct pattern texts tenant's live members hold.
func (l *LivePatterns) Texts(tenant string) int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.tenants[tenant])
}

// holders is how many of tenant's live members hold text.
func (l *LivePatterns) holders(tenant, text string) int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if p := l.tenants[tenant][text]; p != nil {
		return p.members
	}
	return 0
}

// setMemberPattern counts mem in the index (resolve) or takes it out
// (unresolve); a topic-list member is not in it.
func (m *Machine) setMemberPattern(mem *member, live bool) {
	switch {
	case mem.pattern == nil:
	case live:
		m.livePatterns.add(mem)
	default:
		m.livePatterns.remove(mem)
	}
}

// markStale marks mem's pattern stale (topics.go).
func (m *Machine) markStale(mem *member) {
	if !mem.patternStale {
		m.livePatterns.staled(mem)
		mem.patternStale = true
	}
}

// A tenant's live members hold at most limits.topic_patterns_per_tenant
// distinct pattern texts. Each text is matched on its own — at a join,
// at each topic change (within the tenant's topic_pattern_steps), and at
// a restore (a takeover, before the coordinator serves anyone) — so a
// tenant joining members with ever new patterns made a takeover cost
// its patterns × topic_pattern_steps; members sharing a text are matched
// once. TopicPatternsLimit names it in a refusal's details.
const TopicPatternsLimit = "coordinator.groups.limits.topic_patterns_per_tenant"

// admitPattern refuses (409 limit_exceeded) a join or rejoin of tenant
// with sub's pattern when it would be a text tenant's live members do
// not hold yet, past limits.topic_patterns_per_tenant; leaving is the
// member the join replaces (a rejoin's own, a static member's
// predecessor), whose text no longer counts if it is its last holder.
func (m *Machine) admitPattern(ref Ref, tenant string, sub subscription, leaving *member) bool {
	if sub.pattern == nil || m.livePatterns.holders(tenant, sub.patternText) > 0 {
		return true
	}
	n := m.livePatterns.Texts(tenant)
	if leaving != nil && leaving.pattern != nil && leaving.credential.tenant() == tenant && m.livePatterns.holders(tenant, leaving.patternText) == 1 {
		n--
	}
	if limit := m.cfg.Limits.TopicPatternsPerTenant; n >= limit {
		m.send(Rejected{Ref: ref, Code: api.CodeLimitExceeded,
			Message: fmt.Sprintf("join: the credential's tenant %q's live members hold %d distinct topic patterns (%s, %d): "+
				"join with a pattern one of them holds, or subscribe to a topic list; a place comes back when the last member of a pattern leaves or its session times out",
				tenant, n, TopicPatternsLimit, limit),
			Details: map[string]any{"limit": TopicPatternsLimit, "max": int64(limit), "tenant": tenant}})
		return false
	}
	return true
}

// TopicHits is a metadata read's new topics and what the live patterns
// match among them, worked out outside the loop (MatchAdded) and carried
// by the Topics event: the loop takes a pattern's hits from it when it
// was made from its own TopicNames at the version the event changes, for
// the same new topics — a topic change's matching was in the loop,
// within each tenant's topic_pattern_steps, so tenants × that per change
// (~30–50 ms each at the default) held every tenant's requests. A
// pattern that went live since it was made is matched in the loop, as
// before (topics.go). A tenant whose texts took more than its first pass
// is deferred: its texts' hits say so (the loop neither matches nor
// stales them at the change) and MatchDeferred matches them after the
// change went in, for the DeferredHits event.
type TopicHits struct {
	names   *TopicNames
	version uint64
	added   []string // sorted
	hits    map[tenantPattern]patternHits
	// deferred: tenant → its texts not matched in the first pass.
	deferred map[string][]textMatcher
	// Work is the steps the matching took (counted, never timed), and
	// TenantWork each tenant's part of it: what its tenant pays.
	Work       int64
	TenantWork map[string]int64
}

// FirstPassAll is a first pass of a tenant's whole topic_pattern_steps
// (MatchAdded): nothing deferred.
const FirstPassAll = -1

// MatchAdded matches the topics of counts that names does not hold (a
// metadata read's new topics) against the live patterns not stale, each
// tenant's texts in order within limits.topic_pattern_steps in all (a
// pattern past its tenant's budget: over, its members marked stale by the
// loop, as topics.go does); nil when nothing is new. first(tenant,
// spent) is the steps the tenant's texts may take before the change is
// submitted, spent what the tenants before it took
// (FirstPassAll: all of its budget): a tenant whose texts are not all
// matched within it is deferred (Deferred, MatchDeferred), so that one
// tenant's costly patterns do not hold every other tenant's new topics
// back. It runs outside the loop and yields the processor every
// matchYieldSteps.
func (l *LivePatterns) MatchAdded(names *TopicNames, counts map[string]int32, limits Limits, first func(tenant string, spent int64) int) *TopicHits {
	version, current := names.snapshot()
	var added []string
	for topic, n := range counts {
		if _, known := slices.BinarySearch(current, topic); !known && topic != "" && n > 0 {
			added = append(added, topic)
		}
	}
	if len(added) == 0 {
		return nil
	}
	slices.Sort(added)
	th := &TopicHits{names: names, version: version, added: added, hits: make(map[tenantPattern]patternHits),
		deferred: make(map[string][]textMatcher), TenantWork: make(map[string]int64)}
	for _, p := range l.fresh() {
		budget := limits.TopicPatternSteps
		if f := first(p.tenant, th.Work); f != FirstPassAll && f < budget {
			budget = f
			if !th.matchTenant(p, budget, true) {
				th.deferred[p.tenant] = p.texts
				for _, tp := range p.texts {
					th.hits[tenantPattern{tenant: p.tenant, text: tp.text}] = patternHits{deferred: true}
				}
			}
			continue
		}
		th.matchTenant(p, budget, false)
	}
	return th
}

// matchTenant matches p's texts against th's added topics within budget
// steps in all, recording their hits; with partial, it stops at the
// first text past what is left and reports false (nothing recorded for
// p: the tenant is deferred).
func (th *TopicHits) matchTenant(p tenantTexts, budget int, partial bool) bool {
	left := budget
	hits := make(map[tenantPattern]patternHits, len(p.texts))
	sinceYield := int64(0)
	for _, tp := range p.texts {
		topics, steps, over := matchBounded(tp.matcher, th.added, left)
		left = max(left-steps, 0)
		th.Work += int64(steps)
		th.TenantWork[p.tenant] += int64(steps)
		if partial && over {
			return false
		}
		hits[tenantPattern{tenant: p.tenant, text: tp.text}] = patternHits{topics: topics, over: over}
		if sinceYield += int64(steps); sinceYield >= matchYieldSteps {
			sinceYield = 0
			runtime.Gosched()
		}
	}
	maps.Copy(th.hits, hits)
	return true
}

// Deferred is the tenants MatchAdded deferred, sorted.
func (th *TopicHits) Deferred() []string {
	if th == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(th.deferred))
}

// MatchDeferred matches tenant's texts that MatchAdded deferred against
// the same new topics, within the tenant's limits.topic_pattern_steps
// (past it: over, its members marked stale), for the DeferredHits event
// once the change they were deferred from went in; nil for a tenant not
// deferred. over: the tenant's texts are not matched at all (the shell
// fell behind): all marked over. Outside the loop.
func (th *TopicHits) MatchDeferred(tenant string, limits Limits, over bool) *TopicHits {
	texts, ok := th.deferred[tenant]
	if !ok {
		return nil
	}
	late := &TopicHits{names: th.names, version: th.version, added: th.added, hits: make(map[tenantPattern]patternHits),
		TenantWork: make(map[string]int64)}
	if over {
		for _, tp := range texts {
			late.hits[tenantPattern{tenant: tenant, text: tp.text}] = patternHits{over: true}
		}
		return late
	}
	late.matchTenant(tenantTexts{tenant: tenant, texts: texts}, limits.TopicPatternSteps, false)
	return late
}

// tenantTexts is one tenant's patterns not stale, by text.
type tenantTexts struct {
	tenant string
	texts  []textMatcher
}

type textMatcher struct {
	text    string
	matcher *topicpattern.Matcher
}

// fresh is every tenant's texts that some member not stale holds, sorted.
func (l *LivePatterns) fresh() []tenantTexts {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]tenantTexts, 0, len(l.tenants))
	for tenant, texts := range l.tenants {
		tt := tenantTexts{tenant: tenant}
		for text, p := range texts {
			if p.fresh > 0 {
				tt.texts = append(tt.texts, textMatcher{text: text, matcher: p.matcher})
			}
		}
		slices.SortFunc(tt.texts, func(a, b textMatcher) int { return cmp.Compare(a.text, b.text) })
		out = append(out, tt)
	}
	slices.SortFunc(out, func(a, b tenantTexts) int { return cmp.Compare(a.tenant, b.tenant) })
	return out
}

// usable is th's hits when th was made from names at version for the
// topics added, else nil (the loop matches them itself).
func (th *TopicHits) usable(names *TopicNames, version uint64, added []string) map[tenantPattern]patternHits {
	if th == nil || th.names != names || th.version != version || !slices.Equal(th.added, added) {
		return nil
	}
	return th.hits
}
