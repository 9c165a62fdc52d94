package coordinator_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestHugeDurationsDoNotWrapAround sends *_ms values whose nanoseconds
// overflow int64. Before, 9223372036854776 ms wrapped around to 192 µs: a
// lease asking for it passed lease_ttl_max, fenced its partition (a new
// epoch, revoking from its holder) and answered 409 — state changed by a
// refused request; a QoS override for MaxInt64 ms answered 200 already
// expired (now refused: past groups.limits.qos_ttl_max); a join's refusal named a session timeout of "-1ms".
func TestHugeDurationsDoNotWrapAround(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	h := e.start(t)
	gw := newGateway(h, "gw1")
	gw.run(500)
	defer gw.halt()
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	before := h.describe(t, "g").Partitions

	for _, ms := range []int64{9223372036854776, 1<<63 - 1} {
		h.expectError(t, "POST", "/v1/admin/groups/g/partitions/orders/1/lease", e.adminToken,
			coordinator.LeaseRequest{Holder: "partner", TTLMs: ms}, 400, api.CodeBadRequest)
	}
	after := h.describe(t, "g").Partitions
	for i := range before {
		if before[i].Epoch != after[i].Epoch || before[i].State != after[i].State || before[i].Owner != after[i].Owner {
			t.Errorf("a refused lease changed partition %d: %+v -> %+v", before[i].Partition, before[i], after[i])
		}
	}

	// A QoS override for MaxInt64 ms must not wrap around to one already
	// expired: past groups.limits.qos_ttl_max it is refused
	// (TestQoSTTLPastTheLimitRefused), not taken for 192 µs.
	h.expectError(t, "PUT", "/v1/admin/qos", e.adminToken, map[string]any{"selector": map[string]string{"group": "g"}, "ttl_ms": int64(1<<63 - 1)}, 400, api.CodeBadRequest)

	status, b, _ := h.do(t, "POST", "/v1/groups/g/join", creds, map[string]any{"topics": []string{"orders"}, "session_timeout_ms": int64(1<<63 - 1)})
	if status != 400 || strings.Contains(string(b), "-1ms") {
		t.Errorf("a join with a MaxInt64 ms session timeout: %d %s", status, b)
	}
}

// TestOffsetResetNeedsATarget: a reset names an offset or earliest /
// latest. Before, an empty object (or null, or only metadata) rewound the
// group's committed offset to 0.
func TestOffsetResetNeedsATarget(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.fill(t, 10)
	h := e.start(t)
	gw := newGateway(h, "gw1")
	gw.run(500)
	defer gw.halt()
	h.join(t, "g", h.clientCredential(t, []string{"g"}, []string{"orders"}), api.JoinRequest{Topics: []string{"orders"}})
	h.call(t, "PUT", "/v1/admin/groups/g/partitions/orders/0/offset", e.adminToken, map[string]any{"offset": 7}, 200, nil)
	for _, body := range []string{`{}`, `null`, `{"metadata":"m"}`} {
		h.expectError(t, "PUT", "/v1/admin/groups/g/partitions/orders/0/offset", e.adminToken, body, 400, api.CodeBadRequest)
	}
	var offsets api.OffsetsResponse
	h.call(t, "GET", "/v1/groups/g/offsets", e.adminToken, nil, 200, &offsets)
	if len(offsets.Offsets) != 1 || offsets.Offsets[0].Offset != 7 {
		t.Fatalf("committed offsets after refused resets: %+v, want orders/0 at 7", offsets.Offsets)
	}
	var out coordinator.OffsetResetResponse
	h.call(t, "PUT", "/v1/admin/groups/g/partitions/orders/0/offset", e.adminToken, map[string]any{"offset": 0}, 200, &out)
	if out.Offset != 0 {
		t.Fatalf("explicit offset 0: %+v", out)
	}
}

// TestQoSSelectorBounds: a selector partition below 0 matches nothing
// and an id or selector name longer than 255 bytes is state every gateway
// would keep: both 400.
func TestQoSSelectorBounds(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	long := strings.Repeat("x", 256)
	for _, body := range []map[string]any{
		{"selector": map[string]any{"partition": -5}, "ttl_ms": 1000},
		{"id": long, "selector": map[string]any{"group": "g"}, "ttl_ms": 1000},
		{"selector": map[string]any{"group": long}, "ttl_ms": 1000},
		{"selector": map[string]any{"holder": long}, "ttl_ms": 1000},
	} {
		h.expectError(t, "PUT", "/v1/admin/qos", e.adminToken, body, 400, api.CodeBadRequest)
	}
	var list coordinator.QoSListResponse
	h.call(t, "GET", "/v1/admin/qos", e.adminToken, nil, 200, &list)
	if len(list.Overrides) != 0 {
		t.Fatalf("refused overrides kept: %+v", list.Overrides)
	}
}

// TestTokenAnswersAreNotStored: every API answer carrying a bearer token
// (a join's member token and capabilities, a client credential, a shared
// grant) says Cache-Control: no-store, as the OAuth token endpoint's
// does; before, only that endpoint's did.
func TestTokenAnswersAreNotStored(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	for _, c := range []struct {
		path, token string
		body        any
	}{
		{"/v1/admin/clients", e.adminToken, coordinator.ClientRequest{Name: "svc", Groups: []string{"g"}, TTLMs: 60000}},
		{"/v1/admin/capabilities", e.adminToken, map[string]any{"topic": "orders", "partition": 0, "ttl_ms": 60000, "holder": "h"}},
		{"/v1/groups/g/join", creds, api.JoinRequest{Topics: []string{"orders"}}},
	} {
		status, b, header := h.do(t, "POST", c.path, c.token, c.body)
		if status != 200 || header.Get("Cache-Control") != "no-store" {
			t.Errorf("POST %s: %d, Cache-Control %q: %.100s", c.path, status, header.Get("Cache-Control"), b)
		}
	}
}

// TestWrongAdminTokenIsRefusedNotMissing: a wrong admin token is told
// apart from none — the answer said "admin token required" to a caller
// who had sent one.
func TestWrongAdminTokenIsRefusedNotMissing(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	_, none, _ := h.do(t, "GET", "/v1/admin/groups", "", nil)
	_, wrong, _ := h.do(t, "GET", "/v1/admin/groups", "not-the-token", nil)
	if !strings.Contains(string(none), "admin token required") || !strings.Contains(string(wrong), "admin token refused") {
		t.Fatalf("no token: %s; a wrong one: %s", none, wrong)
	}
}

// TestLeaseUnderASecondRefused: a lease of 1 ms fenced its partition
// (its epoch rose) and then answered 409 "lease ended before it was
// granted" — or, of an unowned partition, granted it to the outside
// holder and answered 500 internal: its capability could not be minted
// for under a second. It is 400 now, and nothing changes.
func TestLeaseUnderASecondRefused(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	gw := newGateway(h, "gw1")
	gw.run(500)
	defer gw.halt()
	h.join(t, "g", h.clientCredential(t, []string{"g"}, []string{"orders"}), api.JoinRequest{Topics: []string{"orders"}})
	before := h.describe(t, "g").Partitions[0]
	for _, ms := range []int64{1, 999} {
		h.expectError(t, "POST", "/v1/admin/groups/g/partitions/orders/0/lease", e.adminToken,
			coordinator.LeaseRequest{Holder: "partner", TTLMs: ms}, 400, api.CodeBadRequest)
	}
	if after := h.describe(t, "g").Partitions[0]; after.Epoch != before.Epoch || after.Owner != before.Owner {
		t.Fatalf("a refused lease changed the partition: %+v -> %+v", before, after)
	}
}

// TestHeartbeatWaitZeroAnswersAtOnce: "held up to wait_ms" — a
// heartbeat asking wait_ms 0 is answered at once (one without wait_ms is
// held up to heartbeat_wait, as before). The machine read 0 as
// heartbeat_wait: wait_ms 0 was held the whole heartbeat_wait (here a
// minute, longer than the test client waits for an answer).
func TestHeartbeatWaitZeroAnswersAtOnce(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.Groups.HeartbeatWait = 29 * time.Second
	h := e.start(t)
	m := h.join(t, "g", h.clientCredential(t, []string{"g"}, []string{"orders"}), api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000})
	for i := range 3 { // no news after the first: each answer is the empty one
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second) // half heartbeat_wait
		req, _ := http.NewRequestWithContext(ctx, "POST", h.base+"/v1/groups/g/heartbeat", strings.NewReader(`{"wait_ms":0}`))
		req.Header.Set("Authorization", "Bearer "+m.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.client.Do(req)
		cancel()
		if err != nil {
			t.Fatalf("heartbeat %d with wait_ms 0: %v (held for heartbeat_wait?)", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("heartbeat %d: %d", i, resp.StatusCode)
		}
	}
}
