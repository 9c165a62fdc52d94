package kafkaproto

import (
	"fmt"
	"testing"
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

	lender, err := g.takePlace("c")
	if err != nil || lender != a1 {
		t.Fatalf("tenant c's first member with a and b holding 2 of 4 each: lender %v, %v; want a's newest", lender, err)
	}
	g.mu.Lock()
	g.leavePlaceLocked("c") // the join failed: a's member keeps its place
	g.unlendLocked(lender)
	places, a := g.places, g.byTenant["a"]
	g.mu.Unlock()
	if places != 4 || a != 2 || a1.lent {
		t.Fatalf("after c's failed join: %d places, a holds %d (lent %v); want 4, 2, not lent", places, a, a1.lent)
	}

	if lender, err = g.takePlace("c"); lender != a1 {
		t.Fatalf("c's second try: lender %v, %v; want a's newest", lender, err)
	}
	g.remove(a1) // its join answered: a's member closed (evict) and gone
	if lender, err = g.takePlace("d"); lender != b1 {
		t.Fatalf("tenant d's first member with b holding 2: lender %v, %v; want b's newest", lender, err)
	}
	g.remove(b1) // gone before d's join is answered: nothing to give back
	g.mu.Lock()
	g.leavePlaceLocked("d")
	g.unlendLocked(b1)
	places = g.places
	g.mu.Unlock()
	if places != 3 {
		t.Fatalf("after d's failed join, its lender gone: %d places, want 3", places)
	}
	registerMember(t, g, "d", 2)
	if lender, err := g.takePlace("e"); err != errTooManyMembers {
		t.Fatalf("tenant e with a, b, c and d holding 1 of 4 each: lender %v, %v; want errTooManyMembers", lender, err)
	}
	if lender, err := g.takePlace("a"); err != errTooManyMembers {
		t.Fatalf("tenant a again, at its share: lender %v, %v; want errTooManyMembers", lender, err)
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
	lender, err := g.takePlace("c")
	if err != nil || lender != a1 {
		t.Fatalf("c's join: lender %v, %v; want a's newest", lender, err)
	}
	g.remove(b0)
	if lender, err := g.takePlace("a"); err != errTooManyTenantMembers {
		t.Fatalf("a's third member while its second is lent to c's join: lender %v, %v; want errTooManyTenantMembers", lender, err)
	}
	g.mu.Lock()
	g.leavePlaceLocked("c") // c's join failed: a1 gets its place back
	g.unlendLocked(lender)
	a, lent := g.byTenant["a"], len(g.lentBy)
	g.mu.Unlock()
	if a != 2 || lent != 0 {
		t.Fatalf("after c's failed join: a holds %d (want 2, its cap), lentBy %v", a, g.lentBy)
	}
	if _, err := g.takePlace("a"); err != errTooManyTenantMembers {
		t.Fatalf("a at its cap: %v", err)
	}
}

// registerMember takes a place for tenant's member i while there is room
// and registers it as a join answered would (byID, keys, placed).
func registerMember(t *testing.T, g *groups, tenant string, i int) *member {
	t.Helper()
	if lender, err := g.takePlace(tenant); err != nil || lender != nil {
		t.Fatalf("tenant %s's member %d with room: lender %v, %v", tenant, i, lender, err)
	}
	m := &member{g: g, group: tenant, id: fmt.Sprint(i), key: clientKey{tenant: tenant}}
	g.mu.Lock()
	g.byID[memberRef{m.group, m.id}], g.keys[m] = m, []clientKey{m.key}
	g.placed++
	m.placed = g.placed
	g.mu.Unlock()
	return m
}
