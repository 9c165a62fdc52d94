package coordinator_test

import (
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestTenantRoutesHideTopicsTheBearerMayNotRead is redteam11 #1: in a
// group two credentials may both join, each allowed other topics, tenant
// B read tenant A's committed offsets (and their metadata) of A's topic
// and A's members' subscriptions and owned partitions straight from the
// coordinator — the tenant routes the Kafka listener filters (its
// OffsetFetch and DescribeGroups answer TOPIC_AUTHORIZATION_FAILED) — and
// through its own member's token (GET …/offsets).
func TestTenantRoutesHideTopicsTheBearerMayNotRead(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2, "payments": 2})
	h := e.start(t)
	credA := h.clientCredential(t, []string{"shared"}, []string{"orders"})
	credB := h.clientCredential(t, []string{"shared"}, []string{"payments"})
	ma := h.join(t, "shared", credA, api.JoinRequest{Topics: []string{"orders"}, ClientID: "svc-a", SessionTimeoutMs: 300_000})
	mb := h.join(t, "shared", credB, api.JoinRequest{Topics: []string{"payments"}, ClientID: "svc-b", SessionTimeoutMs: 300_000})
	if status, body := ma.commit(t, "orders", 1, 0, false); status != 200 {
		t.Fatalf("A's commit: %d %s", status, body)
	}
	mb.heartbeat(t, 0)

	var committed api.OffsetsResponse
	h.call(t, "GET", "/v1/groups/shared/committed", credB, nil, 200, &committed)
	for _, o := range committed.Offsets {
		if o.Topic == "orders" {
			t.Errorf("B (payments only) read A's committed offset of orders over GET /v1/groups/shared/committed: %+v", o)
		}
	}
	h.call(t, "GET", "/v1/groups/shared/committed", credA, nil, 200, &committed)
	if len(committed.Offsets) != 1 || committed.Offsets[0].Topic != "orders" {
		t.Errorf("A's own read of its committed offsets: %+v, want orders/1", committed.Offsets)
	}

	var offsets api.OffsetsResponse
	h.call(t, "GET", "/v1/groups/shared/offsets", mb.token, nil, 200, &offsets)
	for _, o := range offsets.Offsets {
		if o.Topic == "orders" {
			t.Errorf("B's member (payments only) read A's committed offset of orders over GET /v1/groups/shared/offsets: %+v", o)
		}
	}
	h.call(t, "GET", "/v1/groups/shared/offsets", ma.token, nil, 200, &offsets)
	if len(offsets.Offsets) != 1 || offsets.Offsets[0].Topic != "orders" {
		t.Errorf("A's member's read of its offsets: %+v, want orders/1", offsets.Offsets)
	}
	h.call(t, "GET", "/v1/groups/shared/offsets", e.adminToken, nil, 200, &offsets)
	if len(offsets.Offsets) != 1 {
		t.Errorf("the admin's read: %+v, want orders/1", offsets.Offsets)
	}

	// The description names A's topic (its member's subscription and
	// owned partitions): refused whole, as Kafka 4.0 answers a group
	// using a topic the principal may not describe (KAFKA-18813).
	var d api.TenantGroupDescription
	if status, body, _ := h.do(t, "GET", "/v1/groups/shared", credB, nil); status != 403 || errorCode(t, body) != api.CodeForbidden {
		t.Errorf("B's describe of shared (A's member subscribes to orders): %d %s, want 403 forbidden", status, body)
	}
	h.expectError(t, "GET", "/v1/groups/shared", credA, nil, 403, api.CodeForbidden) // B's member subscribes to payments
	credAll := h.clientCredential(t, []string{"shared"}, []string{"orders", "payments"})
	h.call(t, "GET", "/v1/groups/shared", credAll, nil, 200, &d)
	if len(d.Members) != 2 {
		t.Errorf("a credential seeing both topics: %+v, want both members", d)
	}
}

// TestTenantReadsBoundedPerTenant is redteam11 #2: every tenant group
// read (GET /v1/groups, /v1/groups/{g}, /committed) walks groups inside
// the coordinator's loop and a description lists every member's topics,
// so one credential asking from many connections at once (a group of 300
// members subscribed to 1,000 topics each, 16 readers) held every other
// tenant's heartbeat up to 2.6 s. A tenant has at most tenantReadsMax
// reads in progress; one more is 429 rate_limited with Retry-After, while
// another tenant reads on, and the places come back when the reads end.
func TestTenantReadsBoundedPerTenant(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	attacker := h.clientCredential(t, []string{"a-*"}, []string{"orders"})
	other := h.clientCredential(t, []string{"b-*"}, []string{"orders"})
	h.join(t, "a-1", attacker, api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000})
	release, err := coordinator.HoldTenantReads(h.c, attacker)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/groups", "/v1/groups/a-1", "/v1/groups/a-1/committed"} {
		header := h.expectError(t, "GET", path, attacker, nil, 429, api.CodeRateLimited)
		if header.Get("Retry-After") == "" {
			t.Errorf("GET %s past the tenant's reads: no Retry-After", path)
		}
	}
	// Another tenant reads on meanwhile.
	h.call(t, "GET", "/v1/groups", other, nil, 200, nil)
	h.call(t, "GET", "/v1/groups/b-1/committed", other, nil, 200, nil)
	h.expectError(t, "GET", "/v1/groups/b-1", other, nil, 404, api.CodeNotFound)
	release()
	for _, path := range []string{"/v1/groups", "/v1/groups/a-1", "/v1/groups/a-1/committed"} {
		h.call(t, "GET", path, attacker, nil, 200, nil)
	}
}
