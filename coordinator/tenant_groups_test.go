package coordinator_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/ocap"
)

// TestTenantGroupsSeeOnlyTheirOwn is the attack on GET /v1/groups and
// GET /v1/groups/{g}: tenant B (grps b-*) asks about tenant A's groups.
// B lists only its own; describing A's running group and an A-style name
// that does not exist are both 403 (no existence oracle), while A gets
// its group (state, its member owning every partition) and 404 for the
// unknown one; the same for the group's committed offsets (/committed).
// Neither a member token nor the admin token is a bearer here: the routes
// are the tenant's, and the gateway never uses the admin token on a
// tenant's behalf.
func TestTenantGroupsSeeOnlyTheirOwn(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 4})
	h := e.start(t)
	credA := h.clientCredential(t, []string{"a-*"}, []string{"orders"})
	credB := h.clientCredential(t, []string{"b-*"}, []string{"orders"})
	join := api.JoinRequest{Topics: []string{"orders"}, ClientID: "svc-a", SessionTimeoutMs: 300_000}
	ma := h.join(t, "a-one", credA, join)
	h.join(t, "a-two", credA, join)
	h.join(t, "b-one", credB, join)

	var listA, listB api.TenantGroupsResponse
	h.call(t, "GET", "/v1/groups", credA, nil, 200, &listA)
	h.call(t, "GET", "/v1/groups", credB, nil, 200, &listB)
	if names := tenantNames(listA); !slices.Equal(names, []string{"a-one", "a-two"}) || listA.NextAfter != "" {
		t.Errorf("tenant A lists %v (next %q), want [a-one a-two]", names, listA.NextAfter)
	}
	if names := tenantNames(listB); !slices.Equal(names, []string{"b-one"}) {
		t.Errorf("tenant B lists %v, want [b-one]", names)
	}
	h.expectError(t, "GET", "/v1/groups/a-one", credB, nil, 403, api.CodeForbidden)
	h.expectError(t, "GET", "/v1/groups/a-missing", credB, nil, 403, api.CodeForbidden)
	h.expectError(t, "GET", "/v1/groups/a-missing", credA, nil, 404, api.CodeNotFound)
	h.expectError(t, "GET", "/v1/groups/a-one/committed", credB, nil, 403, api.CodeForbidden)
	h.expectError(t, "GET", "/v1/groups/a-missing/committed", credB, nil, 403, api.CodeForbidden)
	h.expectError(t, "GET", "/v1/groups/a-one/committed", ma.token, nil, 401, api.CodeUnauthorized)
	if status, body := ma.commit(t, "orders", 2, 0, false); status != 200 {
		t.Fatalf("commit: %d %s", status, body)
	}
	var committed api.OffsetsResponse
	h.call(t, "GET", "/v1/groups/a-one/committed", credA, nil, 200, &committed)
	if len(committed.Offsets) != 1 || committed.Offsets[0].Partition != 2 {
		t.Errorf("a-one's committed offsets for A: %+v, want orders/2", committed)
	}
	h.expectError(t, "GET", "/v1/groups", ma.token, nil, 401, api.CodeUnauthorized)
	h.expectError(t, "GET", "/v1/groups/a-one", e.adminToken, nil, 401, api.CodeUnauthorized)
	h.expectError(t, "GET", "/v1/groups", "", nil, 401, api.CodeUnauthorized)

	var d api.TenantGroupDescription
	h.call(t, "GET", "/v1/groups/a-one", credA, nil, 200, &d)
	if d.Group != "a-one" || len(d.Members) != 1 || d.Members[0].MemberID != ma.id || d.Members[0].ClientID != "svc-a" ||
		!slices.Equal(d.Members[0].Topics, []string{"orders"}) || d.Truncated {
		t.Fatalf("describe a-one: %+v, want its one member %s", d, ma.id)
	}
	var owned []int32
	for _, p := range d.Members[0].Owned {
		owned = append(owned, p.Partition)
	}
	if !slices.Equal(owned, []int32{0, 1, 2, 3}) || d.State != "Stable" {
		t.Errorf("a-one: state %s, member owns %v; want Stable, 0-3", d.State, owned)
	}
}

// TestTenantGroupsPagesMatchNaive checks GroupsMatching (one binary
// search per pattern) against filtering every name, over 400 groups and
// random pattern sets, page by page with a small limit: every allowed
// group exactly once, in order, nothing else.
func TestTenantGroupsPagesMatchNaive(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	rng := rand.New(rand.NewPCG(7, 7))
	var all []string
	for i := range 400 {
		name := fmt.Sprintf("%c%c-%03d", 'a'+rng.IntN(4), 'a'+rng.IntN(3), i)
		all = append(all, name)
		h.call(t, "PUT", "/v1/admin/groups/"+name+"/config", e.adminToken, coordinator.GroupConfigRequest{}, 200, nil)
	}
	all = append(all, "ab") // a name that is also a pattern's prefix
	h.call(t, "PUT", "/v1/admin/groups/ab/config", e.adminToken, coordinator.GroupConfigRequest{}, 200, nil)
	slices.Sort(all)
	patterns := [][]string{{"*"}, {"a*"}, {"ab*", "c*"}, {"ab", "ba-001", "zz*"}, {"b*", "ba*", "b*"}, {"q*"}}
	for range 6 {
		patterns = append(patterns, []string{all[rng.IntN(len(all))], string(rune('a'+rng.IntN(4))) + "*"})
	}
	for _, pats := range patterns {
		cred := h.clientCredential(t, pats, []string{"orders"})
		var want []string
		for _, n := range all {
			if (&ocap.Claims{Groups: pats}).AllowsGroup(n) {
				want = append(want, n)
			}
		}
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > len(all) {
				t.Fatalf("%v: pages never end", pats)
			}
			var page api.TenantGroupsResponse
			h.call(t, "GET", "/v1/groups?limit=7&after="+after, cred, nil, 200, &page)
			if len(page.Groups) > 7 {
				t.Fatalf("%v: a page of %d, limit 7", pats, len(page.Groups))
			}
			got = append(got, tenantNames(page)...)
			for _, g := range page.Groups {
				if g.State != "Empty" {
					t.Fatalf("%v: %s state %q, want Empty (no members)", pats, g.Group, g.State)
				}
			}
			if page.NextAfter == "" {
				break
			}
			after = page.NextAfter
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v: listed %d groups %s…, want %d %s…", pats, len(got), strings.Join(got[:min(5, len(got))], ","), len(want), strings.Join(want[:min(5, len(want))], ","))
		}
	}
}

func tenantNames(r api.TenantGroupsResponse) []string {
	var out []string
	for _, g := range r.Groups {
		out = append(out, g.Group)
	}
	return out
}
