package kafkaproto

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestMemberPlacesHaveAFairShare drives groups' places (the gateway full
// at kafka_max_members 4, 2 a tenant) without a coordinator: a tenant
// under its share borrows the place of the newest member of the tenant
// holding the most; a join that fails gives it back (a join the
// coordinator refuses evicts nobody); no tenant is brought below
// kafka_max_members over the tenants, nor to fewer than the borrower's
// places + 1; a lender that leaves before the join is answered is not
// given its place back. Fails without fairShareLocked (c refused at once).
func TestMemberPlacesHaveAFairShare(t *testing.T) {
	cfg := testConfig()
	cfg.MaxMembers, cfg.MaxMembersPerTenant = 4, 2
	g := newGroups(&Server{cfg: cfg})
	registerMember(t, g, "a", 0)
	a1 := registerMember(t, g, "a", 1)
	registerMember(t, g, "b", 0)
	b1 := registerMember(t, g, "b", 1)

	place, err := g.takePlace(joiner("c"), testNow)
	if err != nil || place.from != a1 || !place.evicts {
		t.Fatalf("tenant c's first member with a and b holding 2 of 4 each: %+v, %v; want a's newest lent", place, err)
	}
	g.mu.Lock()
	g.giveBackLocked("c", place) // the join failed: a's member keeps its place
	places, a := g.places, g.byTenant["a"]
	g.mu.Unlock()
	if places != 4 || a != 2 || a1.place != placeHeld {
		t.Fatalf("after c's failed join: %d places, a holds %d (place %v); want 4, 2, held", places, a, a1.place)
	}

	if place, err = g.takePlace(joiner("c"), testNow); place.from != a1 {
		t.Fatalf("c's second try: %+v, %v; want a's newest", place, err)
	}
	g.remove(a1) // its join answered: a's member closed (evict) and gone
	if place, err = g.takePlace(joiner("d"), testNow); place.from != b1 {
		t.Fatalf("tenant d's first member with b holding 2: %+v, %v; want b's newest", place, err)
	}
	g.remove(b1) // gone before d's join is answered: nothing to give back
	g.mu.Lock()
	g.giveBackLocked("d", place)
	places = g.places
	g.mu.Unlock()
	if places != 3 {
		t.Fatalf("after d's failed join, its lender gone: %d places, want 3", places)
	}
	registerMember(t, g, "d", 2)
	if place, err := g.takePlace(joiner("e"), testNow); err != errTooManyMembers {
		t.Fatalf("tenant e with a, b, c and d holding 1 of 4 each: %+v, %v; want errTooManyMembers", place, err)
	}
	if place, err := g.takePlace(joiner("a"), testNow); err != errTooManyMembers {
		t.Fatalf("tenant a again, at its share: %+v, %v; want errTooManyMembers", place, err)
	}
}

// TestLentPlacesCountAgainstTheTenantsCap (review25 #1): while a member's
// place is lent to another tenant's join in flight, its tenant may not
// fill the place it left and go over kafka_max_members_per_tenant once
// the join fails and the place comes back. Before: a0, a1, b0, b1 at 4
// places, 2 a tenant; c borrows a1's place; b0 leaves; a joins a2 (a
// counted 1 of 2); c's join fails, a1 gets its place back: a held 3.
func TestLentPlacesCountAgainstTheTenantsCap(t *testing.T) {
	cfg := testConfig()
	cfg.MaxMembers, cfg.MaxMembersPerTenant = 4, 2
	g := newGroups(&Server{cfg: cfg})
	registerMember(t, g, "a", 0)
	a1 := registerMember(t, g, "a", 1)
	b0 := registerMember(t, g, "b", 0)
	registerMember(t, g, "b", 1)
	place, err := g.takePlace(joiner("c"), testNow)
	if err != nil || place.from != a1 {
		t.Fatalf("c's join: %+v, %v; want a's newest", place, err)
	}
	g.remove(b0)
	if place, err := g.takePlace(joiner("a"), testNow); err != errTooManyTenantMembers {
		t.Fatalf("a's third member while its second is lent to c's join: %+v, %v; want errTooManyTenantMembers", place, err)
	}
	g.mu.Lock()
	g.giveBackLocked("c", place) // c's join failed: a1 gets its place back
	a, lent := g.byTenant["a"], len(g.lentBy)
	g.mu.Unlock()
	if a != 2 || lent != 0 {
		t.Fatalf("after c's failed join: a holds %d (want 2, its cap), lentBy %v", a, g.lentBy)
	}
	if _, err := g.takePlace(joiner("a"), testNow); err != errTooManyTenantMembers {
		t.Fatalf("a at its cap: %v", err)
	}
}

// registerMember takes a place for tenant's member i while there is room
// and registers it as a join answered would (byID, keys, placed).
func registerMember(t *testing.T, g *groups, tenant string, i int) *member {
	t.Helper()
	if place, err := g.takePlace(joiner(tenant), testNow); err != nil || place.from != nil {
		t.Fatalf("tenant %s's member %d with room: %+v, %v", tenant, i, place, err)
	}
	m := &member{g: g, group: tenant, id: fmt.Sprint(i), key: clientKey{tenant: tenant}}
	g.mu.Lock()
	g.byID[memberRef{m.group, m.id}], g.keys[m] = m, []clientKey{m.key}
	g.placed++
	m.placed = g.placed
	g.mu.Unlock()
	return m
}

// testNow is the time the places are taken at, unless a test moves it.
var testNow = time.Unix(1_000_000, 0)

// joiner is a join of tenant's without a member id (a classic one).
func joiner(tenant string) *member {
	return &member{key: clientKey{tenant: tenant}}
}

// TestMemberEvictionsArePaced (review25 #3): at a full gateway a tenant
// takes at most one place by eviction a kafka_member_eviction_interval.
// Tenant c joins (a's newest lends its place, closed once c's join is
// answered), leaves, a fills its place again, and c joins again: before,
// it closed a's newest once more, at every such round; now it is refused
// retriably (errEvictionPaced) until the interval has passed, and the
// refusal lends nothing. Another tenant is not paced by c's eviction, and
// a join that failed (evicted nobody) does not count. Fails without
// paceLocked (c's second join evicts).
func TestMemberEvictionsArePaced(t *testing.T) {
	cfg := testConfig()
	cfg.MaxMembers, cfg.MaxMembersPerTenant, cfg.MemberEvictionInterval = 4, 2, 30*time.Second
	g := newGroups(&Server{cfg: cfg})
	registerMember(t, g, "a", 0)
	a1 := registerMember(t, g, "a", 1)
	registerMember(t, g, "b", 0)
	registerMember(t, g, "b", 1)

	place, err := g.takePlace(joiner("c"), testNow)
	if err != nil || place.from != a1 || !place.evicts {
		t.Fatalf("c's first join: %+v, %v; want a's newest lent", place, err)
	}
	g.remove(a1) // c's join answered: a1 closed and gone
	g.mu.Lock()
	g.leavePlaceLocked("c") // c's member left
	g.mu.Unlock()
	a2 := registerMember(t, g, "a", 2) // a's client joins again into the free place
	if place, err := g.takePlace(joiner("c"), testNow.Add(10*time.Second)); err != errEvictionPaced || place.from != nil || a2.place != placeHeld {
		t.Fatalf("c's second join 10 s after its eviction: %+v, %v (a's newest %v); want errEvictionPaced, nothing lent", place, err, a2.place)
	}
	if n := g.s.MemberEvictionsPaced(); n != 1 {
		t.Fatalf("%d joins paced, want 1", n)
	}
	d, err := g.takePlace(joiner("d"), testNow.Add(10*time.Second))
	if err != nil || !d.evicts {
		t.Fatalf("tenant d's first join, c's eviction 10 s ago: %+v, %v; want a place lent (paced per tenant)", d, err)
	}
	g.mu.Lock()
	g.giveBackLocked("d", d) // d's join failed: it evicted nobody, so it is not paced
	g.mu.Unlock()
	if d, err = g.takePlace(joiner("d"), testNow.Add(11*time.Second)); err != nil || !d.evicts {
		t.Fatalf("d again after its failed join: %+v, %v; want a place lent", d, err)
	}
	g.mu.Lock()
	g.giveBackLocked("d", d)
	g.mu.Unlock()
	place, err = g.takePlace(joiner("c"), testNow.Add(30*time.Second))
	if err != nil || place.from != a2 || !place.evicts {
		t.Fatalf("c's join an interval after its eviction: %+v, %v; want a's newest lent", place, err)
	}
}

// TestAPassedPlaceComesBack: a join replacing its client's own member
// (the same id and key) takes that member's place over — at a full
// gateway, with its tenant at its bound, lending nothing — and gives it
// back when the join fails; once the old member is gone, a failed join
// frees the place.
func TestAPassedPlaceComesBack(t *testing.T) {
	cfg := testConfig()
	cfg.MaxMembers, cfg.MaxMembersPerTenant = 2, 1
	g := newGroups(&Server{cfg: cfg})
	registerMember(t, g, "a", 0)
	b0 := registerMember(t, g, "b", 0)
	again := func() *member { return &member{group: b0.group, id: b0.id, key: b0.key} }
	place, err := g.takePlace(again(), testNow)
	if err != nil || place.from != b0 || place.evicts {
		t.Fatalf("b0's client joining again as b0: %+v, %v; want b0's place passed on", place, err)
	}
	if other, err := g.takePlace(again(), testNow); err != errTooManyTenantMembers {
		t.Fatalf("a second join as b0 while the first holds its place: %+v, %v; want errTooManyTenantMembers", other, err)
	}
	g.mu.Lock()
	g.giveBackLocked("b", place) // the join failed: b0 keeps its place
	places, b, held := g.places, g.byTenant["b"], b0.place
	g.mu.Unlock()
	if places != 2 || b != 1 || held != placeHeld {
		t.Fatalf("after the failed join: %d places, b %d, b0 %v; want 2, 1, held", places, b, held)
	}
	if place, err = g.takePlace(again(), testNow); place.from != b0 {
		t.Fatalf("b0's client again: %+v, %v", place, err)
	}
	g.remove(b0) // the old instance left: its place is the join's now
	g.mu.Lock()
	places, b = g.places, g.byTenant["b"]
	g.giveBackLocked("b", place) // and that join failed too
	after := g.places
	g.mu.Unlock()
	if places != 2 || b != 1 || after != 1 {
		t.Fatalf("b0 gone while its place was passed on: %d places, b %d, then %d after the join failed; want 2, 1, then 1", places, b, after)
	}
}

// TestMemberEvictionIntervalIsBounded: kafka_member_eviction_interval is
// 0 (no pace) up to MemberEvictionIntervalMax.
func TestMemberEvictionIntervalIsBounded(t *testing.T) {
	for _, every := range []time.Duration{-time.Second, MemberEvictionIntervalMax + time.Second} {
		cfg := testConfig()
		cfg.MemberEvictionInterval = every
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "gateway.kafka_member_eviction_interval") {
			t.Errorf("kafka_member_eviction_interval %s: %v, want refused naming the setting", every, err)
		}
	}
	for _, every := range []time.Duration{0, MemberEvictionIntervalMax} {
		cfg := testConfig()
		cfg.MemberEvictionInterval = every
		if err := cfg.Validate(); err != nil {
			t.Errorf("kafka_member_eviction_interval %s: %v", every, err)
		}
	}
}
