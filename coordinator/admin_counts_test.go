package coordinator_test

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestAdminStateBoundedOverHTTP: the attack is an admin client (a script
// gone wrong, a leaked admin token) adding QoS overrides, denied token ids
// and configured groups under new names without end — the coordinator
// and every gateway hold all of them. Past groups.limits.qos_overrides,
// .denied and .groups each is refused 409 limit_exceeded naming the
// setting, and nothing of it is applied: the lists, the gateways' view
// and the groups are as before; updating what is known still works.
func TestAdminStateBoundedOverHTTP(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	l := &e.cfg.Groups.Limits
	l.QoSOverrides, l.Denied, l.Groups = 2, 2, 2
	h := e.start(t)
	limited := func(method, path string, body any, limit string) {
		t.Helper()
		status, b, _ := h.do(t, method, path, e.adminToken, body)
		d := errorDetails(t, b)
		if status != 409 || errorCode(t, b) != api.CodeLimitExceeded || d["limit"] != "coordinator.groups.limits."+limit || d["max"] != float64(2) {
			t.Fatalf("%s %s past limits.%s: %d %s", method, path, limit, status, b)
		}
	}

	qos := func(group string) coordinator.QoSRequest {
		return coordinator.QoSRequest{Selector: api.QoSSelector{Group: group}, LogLevel: "debug", TTLMs: 3_600_000}
	}
	h.call(t, "PUT", "/v1/admin/qos", e.adminToken, qos("a"), 200, nil)
	h.call(t, "PUT", "/v1/admin/qos", e.adminToken, qos("b"), 200, nil)
	limited("PUT", "/v1/admin/qos", qos("c"), "qos_overrides")
	h.call(t, "PUT", "/v1/admin/qos", e.adminToken, coordinator.QoSRequest{Selector: api.QoSSelector{Group: "a"}, LogLevel: "warn", TTLMs: 60_000}, 200, nil)
	var list coordinator.QoSListResponse
	h.call(t, "GET", "/v1/admin/qos", e.adminToken, nil, 200, &list)
	if len(list.Overrides) != 2 {
		t.Fatalf("overrides after the refusal: %+v", list.Overrides)
	}

	jtis := []string{randomJTI(t), randomJTI(t), randomJTI(t)}
	for _, jti := range jtis[:2] {
		h.call(t, "POST", "/v1/admin/capabilities/"+jti+"/revoke", e.adminToken, coordinator.DenyRequest{}, 200, nil)
	}
	limited("POST", "/v1/admin/capabilities/"+jtis[2]+"/revoke", coordinator.DenyRequest{}, "denied")
	h.call(t, "POST", "/v1/admin/capabilities/"+jtis[0]+"/revoke", e.adminToken, coordinator.DenyRequest{}, 200, nil) // known

	snapshot := newGateway(h, "gw1").poll(t, 0, 0)
	if len(snapshot.Denied) != 2 || len(snapshot.QoS) != 2 {
		t.Fatalf("the gateways' snapshot holds %d denied ids and %d overrides, want 2 and 2", len(snapshot.Denied), len(snapshot.QoS))
	}
	for _, d := range snapshot.Denied {
		if d.JTI == jtis[2] {
			t.Fatalf("refused denial reached the gateways: %+v", d)
		}
	}

	moves := 3
	for _, g := range []string{"g1", "g2"} {
		h.call(t, "PUT", "/v1/admin/groups/"+g+"/config", e.adminToken, coordinator.GroupConfigRequest{MaxMovesPerSecond: &moves}, 200, nil)
	}
	limited("PUT", "/v1/admin/groups/g3/config", coordinator.GroupConfigRequest{MaxMovesPerSecond: &moves}, "groups")
	var names coordinator.GroupsResponse
	h.call(t, "GET", "/v1/admin/groups", e.adminToken, nil, 200, &names)
	if fmt.Sprint(names.Groups) != "[g1 g2]" {
		t.Fatalf("groups after the refusal: %v", names.Groups)
	}
	e.checkLogs(t)
}

func randomJTI(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
