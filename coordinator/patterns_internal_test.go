package coordinator

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/coordinator/group"
)

// TestPatternMatchesOneAtATimePerTenant: a tenant's topic patterns are
// matched one at a time (takeMatcher): its second match waits, counted
// among its waiters, until the first is released, while another
// tenant's match goes at once; a match that waits longer than the
// tenant's wait is answered 429.
func TestPatternMatchesOneAtATimePerTenant(t *testing.T) {
	s := newLoopShare(DefaultConfig(), nil)
	s.wait.Store(int64(time.Minute))
	done := make(chan struct{})
	releaseA, ok := s.takeMatcher(&fasthttp.RequestCtx{}, "a", done)
	if !ok {
		t.Fatal("A's first match refused")
	}
	second := make(chan bool)
	go func() {
		release, ok := s.takeMatcher(&fasthttp.RequestCtx{}, "a", done)
		if ok {
			release()
		}
		second <- ok
	}()
	waiting := func(tenant string) int {
		s.mu.Lock()
		defer s.mu.Unlock()
		if tp := s.tenants[tenant]; tp != nil {
			return tp.waiting
		}
		return 0
	}
	for deadline := time.Now().Add(10 * time.Second); waiting("a") != 1; {
		if time.Now().After(deadline) {
			t.Fatal("A's second match did not wait for its first")
		}
		time.Sleep(time.Millisecond) // polling the condition
	}
	releaseB, ok := s.takeMatcher(&fasthttp.RequestCtx{}, "b", done)
	if !ok {
		t.Fatal("B's match waited on A's")
	}
	releaseB()
	select {
	case <-second:
		t.Fatal("A's second match ran beside its first")
	default:
	}
	releaseA()
	if !<-second {
		t.Fatal("A's second match refused once its first was released")
	}

	s.wait.Store(int64(time.Millisecond))
	releaseA, _ = s.takeMatcher(&fasthttp.RequestCtx{}, "a", done)
	defer releaseA()
	ctx := &fasthttp.RequestCtx{}
	if _, ok := s.takeMatcher(ctx, "a", done); ok || ctx.Response.StatusCode() != http.StatusTooManyRequests {
		t.Fatalf("A's match waiting past its wait: ok %v, status %d; want 429", ok, ctx.Response.StatusCode())
	}
}

// TestPatternCacheIsPerTenant: what a tenant's pattern matched is kept
// for its next joins (a fleet subscribing alike is matched once); one
// tenant joining with ever new patterns evicts only its own, never
// another tenant's — in a cache shared by all, its 300 patterns pushed
// the fleet's out and each of its next joins paid a full match.
func TestPatternCacheIsPerTenant(t *testing.T) {
	m, err := group.New(group.DefaultConfig(), rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int32{}
	for i := range 1000 {
		counts[fmt.Sprintf("team-%04d.service-events", i)] = 1
	}
	m.Step(time.Now(), group.Topics{Partitions: counts})
	pc := newPatternCache(m.TopicNames())
	limits := group.DefaultLimits()
	match := func(tenant, pattern string) *group.PatternMatch {
		t.Helper()
		p, err := pc.match(tenant, pattern, limits)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	fleet := `team-00[0-9][0-9]\..*`
	if p := match("fleet", fleet); p.Work == 0 || p.Count() != 100 {
		t.Fatalf("the fleet's first match: work %d, %d topics", p.Work, p.Count())
	}
	if p := match("fleet", fleet); p.Work != 0 {
		t.Fatalf("the fleet's second match: work %d, want 0 (kept)", p.Work)
	}
	for i := range 300 {
		match("attacker", fmt.Sprintf(`team-%04d\..*`, i))
	}
	if p := match("fleet", fleet); p.Work != 0 || p.Count() != 100 {
		t.Fatalf("the fleet's match after another tenant's 300 patterns: work %d, %d topics; want 0, kept", p.Work, p.Count())
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if n := len(pc.tenants["attacker"].Value.(*tenantPatterns).entries); n > patternCacheEntries {
		t.Fatalf("the attacker's patterns kept: %d, at most %d", n, patternCacheEntries)
	}
}
