package coordinator

import (
	"container/list"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

// A join's topic_pattern is matched here, in the join's goroutine,
// against the machine's topic names at a version (group.TopicNames), and
// the join carries the result into the loop, which matches only the
// topics changed since (group.Join.Matched, group/topicnames.go). In the
// loop, a pattern within the default cost took ~20 ms over 10,000 topics,
// twice per join or rejoin changing a subscription, and one tenant
// rejoining its members with ever new patterns held every other tenant's
// heartbeats for seconds (review23; TestPatternJoinsStallNoOtherTenant).
// Out here the matching still takes processor time, so:
//   - a tenant matches one pattern at a time (its others wait among its
//     tenant_loop_waiters, up to 5 s, then 429): its joins share the
//     processors with everyone's requests instead of taking both;
//   - the work is counted in topicpattern steps and bounded by
//     limits.topic_pattern_steps: past it the join is refused 400 naming
//     the limit (group.StepsError) — `(.?){60}x`, within the cost bound,
//     fails slowly on every name and took 1.1 s of a core over 10,000
//     topics (redteam18);
//   - its tenant_member_rate pays for the work, a token per
//     patternWorkPerToken steps, a refusal the limit's (the bucket's
//     debt, which its next requests wait for, as a large read's);
//   - the matching yields the processor every ~0.1 ms (group.MatchTopics);
//   - matches are kept per tenant and pattern text (patternCache) and
//     brought up to date by matching only the topics changed since, so a
//     fleet's members subscribing alike are matched once, not once each,
//     and one tenant's patterns never evict another's.

// patternWorkPerToken is the matching work (topicpattern steps,
// group.PatternMatch.Work) one token of the tenant's tenant_member_rate
// pays for: about what a token's other uses cost the coordinator
// (redteam18's unit; `.*-events` over 10,000 40-character names is
// ~1.15 M steps, ~1,150 tokens, `orders-.*` ~20).
const patternWorkPerToken = 1000

// The cache is kept per tenant: one tenant's distinct patterns evict
// only its own kept matches (a shared cache let a tenant joining with
// ever new patterns push every other tenant's fleet out of it, each of
// whose next joins then paid a full match). Its bounds:
// patternCacheTenants tenants' caches (the least recently used tenant's
// dropped whole past it), each of patternCacheEntries patterns and
// patternCacheNames topic names in their matches (string headers sharing
// the names' bytes: 16 bytes each; 16 MiB at most in all, and 512
// compiled patterns).
const (
	patternCacheTenants = 32
	patternCacheEntries = 16
	patternCacheNames   = 1 << 15
)

// patternCache is, per tenant, the last match of its recent pattern
// texts, least recently used dropped first. Safe for concurrent use.
type patternCache struct {
	names *group.TopicNames

	mu      sync.Mutex
	tenants map[string]*list.Element // of *tenantPatterns
	order   list.List                // tenants, most recently used first
}

// tenantPatterns is one tenant's kept matches.
type tenantPatterns struct {
	tenant  string
	entries map[string]*list.Element // of *group.PatternMatch
	order   list.List                // most recently used first
	held    int                      // names in every entry's matches
}

func newPatternCache(names *group.TopicNames) *patternCache {
	return &patternCache{names: names, tenants: make(map[string]*list.Element)}
}

// match is pattern's matches among the machine's topic names now, with
// the work done for them: tenant's kept match brought up to date, else a
// full match. An error is a pattern the machine refuses (over limits, or
// not compiling): nothing is matched.
func (pc *patternCache) match(tenant, pattern string, limits group.Limits) (*group.PatternMatch, error) {
	pc.mu.Lock()
	var kept *group.PatternMatch
	if t := pc.tenants[tenant]; t != nil {
		if e := t.Value.(*tenantPatterns).entries[pattern]; e != nil {
			t.Value.(*tenantPatterns).order.MoveToFront(e)
			kept = e.Value.(*group.PatternMatch)
		}
	}
	pc.mu.Unlock()
	if kept != nil {
		if p, ok := kept.Advance(); ok {
			pc.keep(tenant, p)
			return p, nil
		}
	}
	p, err := pc.names.MatchTopics(pattern, limits)
	if err != nil {
		return nil, err
	}
	pc.keep(tenant, p)
	return p, nil
}

// keep stores p as tenant's match of its pattern unless a newer one is
// kept, dropping tenant's least recently used past its bounds, and the
// least recently used tenant's past patternCacheTenants.
func (pc *patternCache) keep(tenant string, p *group.PatternMatch) {
	if p.Count() > patternCacheNames {
		return
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	te := pc.tenants[tenant]
	if te == nil {
		te = pc.order.PushFront(&tenantPatterns{tenant: tenant, entries: make(map[string]*list.Element)})
		pc.tenants[tenant] = te
		for len(pc.tenants) > patternCacheTenants {
			last := pc.order.Back()
			pc.order.Remove(last)
			delete(pc.tenants, last.Value.(*tenantPatterns).tenant)
		}
	}
	pc.order.MoveToFront(te)
	te.Value.(*tenantPatterns).keep(p)
}

// keep stores p unless a newer match of its text is kept.
func (t *tenantPatterns) keep(p *group.PatternMatch) {
	if e := t.entries[p.Text()]; e != nil {
		old := e.Value.(*group.PatternMatch)
		if old.Version() >= p.Version() {
			return
		}
		t.held += p.Count() - old.Count()
		e.Value = p
		t.order.MoveToFront(e)
	} else {
		t.entries[p.Text()] = t.order.PushFront(p)
		t.held += p.Count()
	}
	for len(t.entries) > patternCacheEntries || t.held > patternCacheNames {
		last := t.order.Back()
		gone := last.Value.(*group.PatternMatch)
		t.order.Remove(last)
		delete(t.entries, gone.Text())
		t.held -= gone.Count()
	}
}

// matchPattern matches a join's topic_pattern for the machine
// (group.Join.Matched) as tenant's: one at a time per tenant, its work
// charged to the tenant's tenant_member_rate. ok is false when it
// answered a refusal (400 past limits.topic_pattern_steps, 429, or 503
// with the loop stopped); a nil match
// with ok is a pattern the machine refuses itself.
func (c *Coordinator) matchPattern(ctx *fasthttp.RequestCtx, tenant, pattern string) (*group.PatternMatch, bool) {
	release, ok := c.share.takeMatcher(ctx, tenant, c.loop.done)
	if !ok {
		return nil, false
	}
	defer release()
	p, err := c.patterns.match(tenant, pattern, c.cfg.Groups.Limits)
	var over *group.StepsError
	if errors.As(err, &over) {
		// It did the limit's work before it stopped: paid as a match.
		c.share.charge(tenant, over.Limit/patternWorkPerToken)
		writeErrorDetails(ctx, api.CodeBadRequest, over.Error(),
			map[string]any{"limit": group.TopicPatternStepsLimit, "max": int64(over.Limit)})
		return nil, false
	}
	if err != nil {
		return nil, true
	}
	c.share.charge(tenant, int(p.Work/patternWorkPerToken))
	return p, true
}

// takeMatcher waits for tenant's one pattern match at a time, counted
// among its tenant_loop_waiters, at most loopShareWait; else it answers
// 429 (503 when the loop stopped) and returns false.
func (s *loopShare) takeMatcher(ctx *fasthttp.RequestCtx, tenant string, done <-chan struct{}) (release func(), ok bool) {
	t := s.enter(tenant)
	switch s.waitTurn(ctx, t, t.matching, done) {
	case nil:
		return s.releaser(tenant, t, t.matching), true
	case errLoopShareWait:
		s.refused.WithLabelValues("wait").Inc()
		writeLoopShareRefusal(ctx, fmt.Sprintf("this tenant's topic patterns are matched one at a time and this join's waited %s; retry later",
			time.Duration(s.wait.Load())), "coordinator.tenant_loop_share", 1, time.Second)
	case errUnavailable:
		writeMachineError(ctx, nil, errUnavailable)
	}
	s.leave(tenant, t)
	return nil, false
}
