package coordinator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestAdminTopics: an admin lists the topics the coordinator knows
// (internal ones never) and describes one — each partition's earliest and
// latest offset as Kafka has them. There was no way to ask capgate what
// a topic is (newuser5): no route, and `capgate topic describe` was an
// unknown command. An unknown topic is 404, an internal one 403 saying
// why, a name no topic has 400.
func TestAdminTopics(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 3, "audit": 1, "__consumer_offsets": 2, "capgate-state-x": 1})
	h := e.start(t)
	for i := range 5 {
		rec := &kgo.Record{Topic: "orders", Partition: 1, Value: []byte(fmt.Sprint(i))}
		if _, err := e.broker.Produce(context.Background(), "orders", 1, []*kgo.Record{rec}); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}

	var list coordinator.TopicsResponse
	h.call(t, "GET", "/v1/admin/topics", e.adminToken, nil, 200, &list)
	if fmt.Sprint(list) != "{[{audit 1} {orders 3}] }" {
		t.Fatalf("GET /v1/admin/topics: %+v, want audit (1) and orders (3), no internal topic", list)
	}
	list = coordinator.TopicsResponse{}
	h.call(t, "GET", "/v1/admin/topics?limit=1", e.adminToken, nil, 200, &list)
	if fmt.Sprint(list) != "{[{audit 1}] audit}" {
		t.Fatalf("GET /v1/admin/topics?limit=1: %+v, want audit, next_after audit", list)
	}
	list = coordinator.TopicsResponse{}
	h.call(t, "GET", "/v1/admin/topics?after=audit", e.adminToken, nil, 200, &list)
	if fmt.Sprint(list) != "{[{orders 3}] }" {
		t.Fatalf("GET /v1/admin/topics?after=audit: %+v, want orders alone", list)
	}

	var d coordinator.TopicDescription
	h.call(t, "GET", "/v1/admin/topics/orders", e.adminToken, nil, 200, &d)
	if d.Topic != "orders" || len(d.Partitions) != 3 {
		t.Fatalf("GET /v1/admin/topics/orders: %+v, want its 3 partitions", d)
	}
	for _, p := range d.Partitions {
		want := int64(0)
		if p.Partition == 1 {
			want = 5
		}
		if p.EarliestOffset == nil || *p.EarliestOffset != 0 || p.LatestOffset == nil || *p.LatestOffset != want {
			t.Fatalf("orders/%d: earliest %v latest %v, want 0 and %d", p.Partition, p.EarliestOffset, p.LatestOffset, want)
		}
	}

	h.expectError(t, "GET", "/v1/admin/topics/nosuch", e.adminToken, nil, 404, api.CodeNotFound)
	h.expectError(t, "GET", "/v1/admin/topics/__consumer_offsets", e.adminToken, nil, 403, api.CodeForbidden)
	h.expectError(t, "GET", "/v1/admin/topics/capgate-state-x", e.adminToken, nil, 403, api.CodeForbidden)
	h.expectError(t, "GET", "/v1/admin/topics/a%20b", e.adminToken, nil, 400, api.CodeBadRequest)
	h.expectError(t, "GET", "/v1/admin/topics/orders?limit=1", e.adminToken, nil, 400, api.CodeBadRequest)
	h.expectError(t, "GET", "/v1/admin/topics?limit=0", e.adminToken, nil, 400, api.CodeBadRequest)
	h.expectError(t, "GET", "/v1/admin/topics/orders", "not-the-token", nil, 401, api.CodeUnauthorized)

	// GET /v1/topics/orders (rpk's habit) was told "records are fetched
	// and produced at a gateway: send this to a gateway", which has no
	// such route either; it points at the topic describe.
	for _, path := range []string{"/v1/topics/orders", "/v1/topics", "/v1/topics/orders/"} {
		if status, b, _ := h.do(t, "GET", path, e.adminToken, nil); status != 404 || !strings.Contains(string(b), "GET /v1/admin/topics/{topic}") {
			t.Errorf("GET %s: %d %s, want 404 pointing at /v1/admin/topics/{topic}", path, status, b)
		}
	}
	if _, b, _ := h.do(t, "GET", "/v1/topics/orders/partitions/0/records", e.adminToken, nil); !strings.Contains(string(b), "at a gateway") {
		t.Errorf("a records route at the coordinator: %s, want sent to a gateway", b)
	}
}

// TestUnknownPartitionSaysWhich: an admin grant (capgate produce mints
// one per partition) of a topic Kafka lacks, or of a partition past the
// topic's count, was "unknown topic or partition" either way, a lease
// "unknown partition" (newuser5: capgate produce -t nosuch); each says
// which.
func TestUnknownPartitionSaysWhich(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 3})
	h := e.start(t)
	for _, c := range []struct {
		topic     string
		partition int32
		want      string
	}{
		{"nosuch", 0, `unknown topic \"nosuch\": Kafka has no such topic`},
		{"orders", 3, `topic \"orders\" has 3 partitions (0 to 2): no partition 3`},
	} {
		status, b, _ := h.do(t, "POST", "/v1/admin/capabilities", e.adminToken,
			coordinator.SharedGrantRequest{Topic: c.topic, Partition: c.partition, Holder: "h", TTLMs: 60_000})
		if status != 404 || !strings.Contains(string(b), c.want) {
			t.Errorf("grant %s/%d: %d %s, want 404 %s", c.topic, c.partition, status, b, c.want)
		}
		status, b, _ = h.do(t, "POST", fmt.Sprintf("/v1/admin/groups/g/partitions/%s/%d/lease", c.topic, c.partition), e.adminToken,
			coordinator.LeaseRequest{Holder: "h", TTLMs: 60_000})
		if status != 404 || !strings.Contains(string(b), c.want) {
			t.Errorf("lease %s/%d: %d %s, want 404 %s", c.topic, c.partition, status, b, c.want)
		}
	}
}
