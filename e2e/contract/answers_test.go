package contract_test

import (
	"net/url"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/api/apicheck"
)

// TestAnswersFitTheDocument is what a client generated from the
// document decodes (dayone2): the successful answer of each operation a
// member, a tenant and an operator use, every one validated against its
// documented status, headers and schema. Before, the contract tests
// held the walk-through's handful of successes and every operation's
// refusals to the document, and no test could hold a raw fetch to it:
// kin-openapi refused application/vnd.kafka.record-batch as an
// unsupported content type (apicheck now decodes it as bytes, so the
// required Capgate-Next-Offset and Capgate-High-Watermark headers are
// checked on both media types).
func TestAnswersFitTheDocument(t *testing.T) {
	c, cl := startCluster(t)
	admin := c.AdminToken
	var client struct {
		Credential string `json:"client_credential"`
	}
	do(t, cl, apicheck.Call{Op: "admin_clients", Bearer: admin,
		Body: map[string]any{"name": "answers", "groups": []string{"g"}, "topics": []string{"demo"}, "ttl_ms": 600000}}, 200, &client)
	var joined api.JoinResponse
	do(t, cl, apicheck.Call{Op: "join", Path: map[string]string{"group": "g"}, Bearer: client.Credential,
		Body: map[string]any{"topics": []string{"demo"}, "session_timeout_ms": 60000, "instance_id": "i1", "client_id": "svc"}}, 200, &joined)
	held := map[int32]string{}
	for _, g := range joined.Grants {
		held[g.Partition] = g.Capability
	}
	if len(held) != 12 {
		t.Fatalf("a lone member holds %d partitions, want 12", len(held))
	}
	g := map[string]string{"group": "g"}
	p3 := map[string]string{"topic": "demo", "partition": "3"}
	from0 := url.Values{"offset": {"0"}}
	for _, call := range []apicheck.Call{
		{Op: "heartbeat", Bearer: joined.MemberToken, Path: g, Body: map[string]any{"wait_ms": 0}},
		{Op: "commit", Bearer: joined.MemberToken, Path: g, Body: map[string]any{"offsets": []any{
			map[string]any{"topic": "demo", "partition": 1, "offset": 0, "capability": held[1]}}}},
		{Op: "offsets", Bearer: joined.MemberToken, Path: g},
		{Op: "attenuate", Bearer: held[3], Body: map[string]any{"ops": []string{"fetch"}}},
		{Op: "fetch_records", Bearer: held[3], Path: p3, Query: from0},
		{Op: "fetch_records", Bearer: held[3], Path: p3, Query: from0, Accept: api.MediaRecordBatch},
		{Op: "tenant_groups", Bearer: client.Credential},
		{Op: "tenant_group", Bearer: client.Credential, Path: g},
		{Op: "tenant_group_offsets", Bearer: client.Credential, Path: g},
		{Op: "admin_groups", Bearer: admin},
		{Op: "admin_group", Bearer: admin, Path: g},
		{Op: "admin_group_summary", Bearer: admin, Path: g},
		{Op: "offsets", Bearer: admin, Path: g},
		{Op: "admin_topics", Bearer: admin},
		{Op: "admin_topic", Bearer: admin, Path: map[string]string{"topic": "demo"}},
		{Op: "admin_gateways", Bearer: admin},
		{Op: "admin_qos", Bearer: admin, Body: map[string]any{"selector": map[string]any{"group": "g", "topic": "demo", "partition": 0},
			"max_bytes_per_sec": 1000, "ttl_ms": 60000}},
		{Op: "admin_qos_list", Bearer: admin},
		{Op: "admin_group_config", Bearer: admin, Path: g, Body: map[string]any{"max_moves_per_second": 5}},
		{Op: "admin_partition_lease", Bearer: admin, Path: map[string]string{"group": "g", "topic": "demo", "partition": "0"},
			Body: map[string]any{"holder": "partner", "ttl_ms": 60000}},
		{Op: "admin_partition_offset", Bearer: admin, Path: map[string]string{"group": "g", "topic": "demo", "partition": "2"},
			Body: map[string]any{"offset": 0}},
		{Op: "admin_capabilities", Bearer: admin, Body: map[string]any{"topic": "demo", "partition": 0, "ttl_ms": 1000, "holder": "h"}},
		{Op: "admin_keys_rotate", Bearer: admin, Body: map[string]any{}},
		{Op: "admin_oauth_client_create", Bearer: admin, Body: map[string]any{"name": "n", "groups": []string{"g"}, "topics": []string{"demo"}}},
		{Op: "admin_oauth_clients", Bearer: admin},
		{Op: "admin_member_revoke", Bearer: admin, Path: map[string]string{"group": "g", "member": joined.MemberID}, Body: map[string]any{"reason": "answers"}},
		{Op: "admin_audit", Bearer: admin},
	} {
		do(t, cl, call, 200, nil)
	}
}
