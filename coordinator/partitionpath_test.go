package coordinator_test

import (
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestAdminPartitionPathHasOneSpelling: the admin partition routes took
// any strconv spelling of the partition — .../partitions/orders/01/revoke
// revoked partition 1, and +1, 001 too — so one partition had many paths,
// which a path rule in a proxy or an audit search tells apart. A
// partition has one spelling on the coordinator as on the gateway now
// (no sign, no leading zero); any other is 400 naming the rule, and
// nothing is revoked, leased or reset.
func TestAdminPartitionPathHasOneSpelling(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 4})
	h := e.start(t)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	a := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	before, _ := a.grant("orders", 1)
	for _, call := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/v1/admin/groups/g/partitions/orders/01/revoke", coordinator.RevokeRequest{Reason: "alias"}},
		{"POST", "/v1/admin/groups/g/partitions/orders/+1/revoke", coordinator.RevokeRequest{Reason: "alias"}},
		{"POST", "/v1/admin/groups/g/partitions/orders/0000000001/revoke", coordinator.RevokeRequest{Reason: "alias"}},
		{"POST", "/v1/admin/groups/g/partitions/orders/01/lease", coordinator.LeaseRequest{Holder: "x", TTLMs: 60_000}},
		{"PUT", "/v1/admin/groups/g/partitions/orders/01/offset", coordinator.OffsetResetRequest{To: "latest"}},
		{"POST", "/v1/admin/groups/g/partitions/orders/2147483648/revoke", coordinator.RevokeRequest{Reason: "past int32"}},
		{"POST", "/v1/admin/groups/g/partitions/orders/-1/revoke", coordinator.RevokeRequest{Reason: "negative"}},
	} {
		status, b, _ := h.do(t, call.method, call.path, e.adminToken, call.body)
		if status != 400 || errorCode(t, b) != api.CodeBadRequest {
			t.Errorf("%s %s: %d %s, want 400 bad_request", call.method, call.path, status, b)
			continue
		}
		for _, want := range []string{"partition", "leading zeros", "[0, 2147483647]"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s %s: %s does not say %q", call.method, call.path, b, want)
			}
		}
	}
	for _, p := range h.describe(t, "g").Partitions {
		if p.Partition == 1 && (p.Epoch != before.Epoch || p.State != "owned" || p.Committed != nil) {
			t.Fatalf("partition 1 after the refused calls: %+v, want owned at epoch %d, nothing committed", p, before.Epoch)
		}
	}
	h.call(t, "POST", "/v1/admin/groups/g/partitions/orders/1/revoke", e.adminToken, coordinator.RevokeRequest{Reason: "the one spelling"}, 200, nil)
}
