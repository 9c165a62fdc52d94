package coordinator_test

import (
	"testing"

	"github.com/capgate/capgate/api"
)

// TestCapabilitiesCarryTheirTenant: every capability a join grants
// carries tnt, the tenant of the credential that joined (its jti for a
// client credential), whichever group it joined and whichever member it
// became, so a gateway can bound one tenant's fetches in flight however
// many joins it makes (redteam3 #1). Another credential's capabilities
// carry its own. Before, nothing in a capability named the credential:
// sub is the member id (the client's own client_id and random digits).
func TestCapabilitiesCarryTheirTenant(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	h := e.start(t)
	credA := h.clientCredential(t, []string{"*"}, []string{"orders"})
	credB := h.clientCredential(t, []string{"*"}, []string{"orders"})
	tenantA, tenantB := claimsOf(t, credA)["jti"], claimsOf(t, credB)["jti"]
	check := func(m *member, want any) {
		t.Helper()
		n := 0
		for p := range int32(2) {
			g, ok := m.grant("orders", p)
			if !ok {
				continue
			}
			n++
			c := claimsOf(t, g.Capability)
			if c["tnt"] != want || c["sub"] != m.id {
				t.Fatalf("group %s member %s: capability tnt %v sub %v, want tnt %v (the credential's jti) and sub the member", m.group, m.id, c["tnt"], c["sub"], want)
			}
		}
		if n == 0 {
			t.Fatalf("group %s: no grant", m.group)
		}
	}
	for _, g := range []string{"fill-1", "fill-2", "fill-3"} {
		check(h.join(t, g, credA, api.JoinRequest{Topics: []string{"orders"}, ClientID: "c-" + g}), tenantA)
	}
	check(h.join(t, "victim", credB, api.JoinRequest{Topics: []string{"orders"}}), tenantB)
}
