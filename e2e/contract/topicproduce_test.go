package contract_test

import (
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/api/apicheck"
)

// TestTopicProduceFromDocument: produce_topic_records built from the
// document alone — a credential minted with produce writes keyed records
// to the topic and the answer fits TopicProduceResponse; a capability on
// the route is the documented 403 naming the per-partition route.
func TestTopicProduceFromDocument(t *testing.T) {
	c, cl := startCluster(t)
	var client struct {
		Credential string `json:"client_credential"`
	}
	do(t, cl, apicheck.Call{Op: "admin_clients", Bearer: c.AdminToken,
		Body: map[string]any{"name": "writer", "groups": []string{"g"}, "topics": []string{"demo"}, "ops": []string{"consume", "produce"}, "ttl_ms": 600000}}, 200, &client)
	var produced api.TopicProduceResponse
	do(t, cl, apicheck.Call{Op: "produce_topic_records", Path: map[string]string{"topic": "demo"}, Bearer: client.Credential,
		Body: map[string]any{"records": []map[string]string{{"key": b64("a"), "value": b64("1")}, {"key": b64("b"), "value": b64("2")}, {"value": b64("3")}}}}, 200, &produced)
	total := 0
	for _, p := range produced.Partitions {
		total += p.Count
	}
	if produced.Count != 3 || total != 3 {
		t.Fatalf("produced %+v", produced)
	}
	var capability api.CapabilityResponse
	do(t, cl, apicheck.Call{Op: "admin_capabilities", Bearer: c.AdminToken,
		Body: map[string]any{"topic": "demo", "partition": 0, "ops": []string{"produce"}, "ttl_ms": 60000, "holder": "h"}}, 200, &capability)
	resp := do(t, cl, apicheck.Call{Op: "produce_topic_records", Path: map[string]string{"topic": "demo"}, Bearer: capability.Capability,
		Body: map[string]any{"records": []map[string]string{{"value": b64("x")}}}}, 403, nil)
	if resp.Code != api.CodeForbidden {
		t.Fatalf("capability on the topic route: %s", resp.Body)
	}
}
