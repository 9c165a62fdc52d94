package coordinator_test

import (
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestOffsetRangeChildCannotProduce is redteam6 #5 over HTTP: an admin
// grant with fetch and produce, attenuated to offsets [0, 2), produced
// at 2, 3, … through both gateway listeners (the range bounds reads
// only). The attenuation is refused now unless it drops produce, with a
// message saying so, and so is an admin grant asking for both.
func TestOffsetRangeChildCannotProduce(t *testing.T) {
	e := newEnv(t, map[string]int32{"demo": 5})
	h := e.start(t)
	var parent api.CapabilityResponse
	h.call(t, "POST", "/v1/admin/capabilities", e.adminToken, coordinator.SharedGrantRequest{
		Topic: "demo", Partition: 4, Ops: []string{"fetch", "produce"}, TTLMs: 60000, Holder: "rtp"}, 200, &parent)
	e.remember(parent.Capability)
	from, to := int64(0), int64(2)
	status, body, _ := h.do(t, "POST", "/v1/capabilities/attenuate", parent.Capability, api.AttenuateRequest{OffsetFrom: &from, OffsetTo: &to})
	if status != 400 || errorCode(t, body) != api.CodeBadRequest || !strings.Contains(string(body), "bounds reads only") {
		t.Fatalf("attenuate a fetch+produce capability to [0, 2): %d %s, want 400 saying the range bounds reads only", status, body)
	}
	var child api.CapabilityResponse
	h.call(t, "POST", "/v1/capabilities/attenuate", parent.Capability, api.AttenuateRequest{Ops: []string{"fetch"}, OffsetFrom: &from, OffsetTo: &to}, 200, &child)
	e.remember(child.Capability)
	if claims := verifyWithJWKS(t, h, child.Capability); claims.Ops.String() != "fetch" || claims.Offsets == nil {
		t.Fatalf("fetch-only child: %+v", claims)
	}
	status, body, _ = h.do(t, "POST", "/v1/admin/capabilities", e.adminToken, coordinator.SharedGrantRequest{
		Topic: "demo", Partition: 4, Ops: []string{"fetch", "produce"}, TTLMs: 60000, Holder: "rtp", OffsetFrom: &from, OffsetTo: &to})
	if status != 400 || !strings.Contains(string(body), "bounds reads only") {
		t.Fatalf("admin grant of produce on [0, 2): %d %s, want 400 saying the range bounds reads only", status, body)
	}
}
