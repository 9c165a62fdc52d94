package coordinator_test

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestSecurity exercises every refusal of the auth table (auth.go) against
// one running coordinator, then checks that no token reached the logs.
func TestSecurity(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 4, "payments": 2})
	h := e.start(t)
	creds := h.clientCredential(t, []string{"g", "h"}, []string{"orders"})
	a := h.join(t, "g", creds, api.JoinRequest{ClientID: "a", Topics: []string{"orders"}})
	b := h.join(t, "h", creds, api.JoinRequest{ClientID: "b", Topics: []string{"orders"}})
	if len(a.grants) != 4 || len(b.grants) != 4 {
		t.Fatalf("grants: a %d, b %d; want 4 each", len(a.grants), len(b.grants))
	}
	bGrant, _ := b.grant("orders", 0)
	aGrant, _ := a.grant("orders", 0)

	t.Run("join", func(t *testing.T) {
		body := api.JoinRequest{Topics: []string{"orders"}}
		header := h.expectError(t, "POST", "/v1/groups/g/join", "", body, 401, api.CodeUnauthorized)
		if !strings.HasPrefix(header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("401 without WWW-Authenticate: Bearer: %v", header)
		}
		h.expectError(t, "POST", "/v1/groups/other/join", creds, body, 403, api.CodeForbidden)
		h.expectError(t, "POST", "/v1/groups/g/join", creds, api.JoinRequest{Topics: []string{"payments"}}, 403, api.CodeForbidden)
		h.expectError(t, "POST", "/v1/groups/g/join", creds, api.JoinRequest{TopicPattern: ".*"}, 403, api.CodeForbidden)
		h.expectError(t, "POST", "/v1/groups/g/join", a.token, body, 401, api.CodeUnauthorized)      // a member token is no client credential
		h.expectError(t, "POST", "/v1/groups/g/join", e.adminToken, body, 401, api.CodeUnauthorized) // nor is the admin token
	})

	t.Run("member token", func(t *testing.T) {
		h.expectError(t, "POST", "/v1/groups/g/heartbeat", "", nil, 401, api.CodeUnauthorized)
		h.expectError(t, "POST", "/v1/groups/g/heartbeat", creds, nil, 401, api.CodeUnauthorized)
		h.expectError(t, "POST", "/v1/groups/g/heartbeat", aGrant.Capability, nil, 401, api.CodeUnauthorized)
		// a's token in b's group, for every member route.
		for _, route := range []string{"heartbeat", "commit", "leave"} {
			h.expectError(t, "POST", "/v1/groups/h/"+route, a.token, "{}", 403, api.CodeForbidden)
		}
		h.expectError(t, "GET", "/v1/groups/h/offsets", a.token, nil, 403, api.CodeForbidden)
		h.expectError(t, "POST", "/v1/groups/g/heartbeat", tamper(a.token, a.id, b.id), nil, 401, api.CodeUnauthorized)
	})

	t.Run("commit with another's capability", func(t *testing.T) {
		commit := func(group, token string, capability string) {
			t.Helper()
			h.expectError(t, "POST", "/v1/groups/"+group+"/commit", token, api.CommitRequest{
				Offsets: []api.CommitOffset{{Topic: "orders", Partition: 0, Offset: 5, Capability: capability}},
			}, 403, api.CodeForbidden)
		}
		commit("g", a.token, bGrant.Capability) // b's capability (group h) in group g
		commit("h", b.token, aGrant.Capability) // a's capability (group g) in group h
		h.expectError(t, "POST", "/v1/groups/g/leave", a.token, api.LeaveRequest{
			Offsets: []api.CommitOffset{{Topic: "orders", Partition: 0, Offset: 5, Capability: bGrant.Capability}},
		}, 403, api.CodeForbidden)
		a1, _ := a.grant("orders", 1)
		h.expectError(t, "POST", "/v1/groups/g/commit", a.token, api.CommitRequest{
			Offsets: []api.CommitOffset{{Topic: "orders", Partition: 0, Offset: 5, Capability: a1.Capability}},
		}, 403, api.CodeForbidden) // capability for partition 1, offset for partition 0
		h.expectError(t, "POST", "/v1/groups/g/commit", a.token, api.CommitRequest{
			Offsets: []api.CommitOffset{{Topic: "orders", Partition: 0, Offset: 5, Capability: "garbage"}},
		}, 401, api.CodeUnauthorized)
	})

	t.Run("admin and sync", func(t *testing.T) {
		admin := []struct{ method, path string }{
			{"GET", "/v1/admin/groups"}, {"GET", "/v1/admin/groups/g"}, {"GET", "/v1/admin/gateways"},
			{"POST", "/v1/admin/groups/g/partitions/orders/0/revoke"}, {"POST", "/v1/admin/groups/g/partitions/orders/0/lease"},
			{"POST", "/v1/admin/capabilities"}, {"POST", "/v1/admin/capabilities/AAAAAAAAAAAAAAAAAAAAAA/revoke"},
			{"POST", "/v1/admin/groups/g/members/x/revoke"}, {"PUT", "/v1/admin/qos"}, {"PUT", "/v1/admin/groups/g/config"},
			{"POST", "/v1/admin/clients"}, {"POST", "/v1/admin/keys/rotate"}, {"PUT", "/v1/admin/groups/g/partitions/orders/0/offset"},
		}
		for _, r := range admin {
			for _, token := range []string{"", "wrong", e.syncToken, a.token} {
				h.expectError(t, r.method, r.path, token, "{}", 401, api.CodeUnauthorized)
			}
		}
		for _, token := range []string{"", "wrong", e.adminToken} {
			h.expectError(t, "GET", "/v1/sync?gateway=gw1", token, nil, 401, api.CodeUnauthorized)
		}
		h.call(t, "GET", "/.well-known/jwks.json", "", nil, 200, &api.JWKS{})
	})

	t.Run("bodies", func(t *testing.T) {
		h.expectError(t, "POST", "/v1/groups/g/heartbeat", a.token, `{"wait_ms":1,"bogus":true}`, 400, api.CodeBadRequest)
		h.expectError(t, "POST", "/v1/admin/clients", e.adminToken, `{"name":"x","groups":["g"],"topics":["t"],"admin":true}`, 400, api.CodeBadRequest)
		h.expectError(t, "POST", "/v1/groups/g/heartbeat", a.token, `{"wait_ms":1} {}`, 400, api.CodeBadRequest)
		h.expectError(t, "POST", "/v1/groups/g/commit", a.token, `[`, 400, api.CodeBadRequest)
		status, b := oversize(t, h, "/v1/groups/g/commit", a.token, e.cfg.MaxBodyBytes+1)
		if status != 413 || errorCode(t, b) != api.CodeBodyTooLarge {
			t.Fatalf("oversize body: %d %s", status, b)
		}
		status, b = oversizeHeader(t, h, e.cfg.MaxHeaderBytes)
		if status != 431 || errorCode(t, b) != api.CodeHeadersTooLarge {
			t.Fatalf("oversize headers: %d %s", status, b)
		}
		h.expectError(t, "GET", "/v1/nope", "", nil, 404, api.CodeNotFound)
		header := h.expectError(t, "DELETE", "/v1/groups/g/join", "", nil, 405, api.CodeMethodNotAllowed)
		if header.Get("Allow") != http.MethodPost {
			t.Fatalf("Allow = %q", header.Get("Allow"))
		}
		header = h.expectError(t, "POST", "/v1/admin/groups/g", e.adminToken, nil, 405, api.CodeMethodNotAllowed)
		if header.Get("Allow") != http.MethodGet+", "+http.MethodDelete {
			t.Fatalf("Allow = %q", header.Get("Allow"))
		}
	})

	t.Run("admin may read offsets", func(t *testing.T) {
		var out api.OffsetsResponse
		h.call(t, "GET", "/v1/groups/g/offsets", e.adminToken, nil, 200, &out)
		h.call(t, "GET", "/v1/groups/g/offsets", a.token, nil, 200, &out)
	})

	h.stop(t)
	if len(e.logs.All()) == 0 {
		t.Fatal("no logs captured")
	}
	e.checkLogs(t)
}

// oversize announces a body of n bytes on a raw connection, sends only its
// first bytes, and reads the answer: the server must refuse it from the
// Content-Length alone (a client still writing would see a reset).
func oversize(t *testing.T, h *harness, path, token string, n int) (int, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", h.c.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"offsets\":", path, token, n)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// oversizeHeader sends a request whose headers exceed n bytes.
func oversizeHeader(t *testing.T, h *harness, n int) (int, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", h.c.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: %s\r\n\r\n", strings.Repeat("p", n))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// tamper rewrites the payload of a JWT (keeping its signature).
func tamper(token, from, to string) string {
	parts := strings.Split(token, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(strings.ReplaceAll(string(payload), from, to)))
	return strings.Join(parts, ".")
}

func TestConfigValidate(t *testing.T) {
	if err := coordinator.DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*coordinator.Config)
		want   string
	}{
		{"id", func(c *coordinator.Config) { c.ID = "" }, "id:"},
		{"listen", func(c *coordinator.Config) { c.Listen = "7070" }, "listen:"},
		{"hash", func(c *coordinator.Config) { c.AdminTokenHashes = []string{"abc"} }, "admin_token_hashes[0]:"},
		{"leeway", func(c *coordinator.Config) { c.Leeway = 3e9 }, "leeway:"},
		{"max_lease", func(c *coordinator.Config) { c.MaxLease = c.CapabilityLease / 2 }, "max_lease:"},
		{"body", func(c *coordinator.Config) { c.MaxBodyBytes = 0 }, "max_body_bytes:"},
		{"machine", func(c *coordinator.Config) { c.Groups.SyncWaitMax = c.Groups.GatewayTimeout }, "groups.sync_wait_max:"},
		{"heartbeat", func(c *coordinator.Config) { c.Groups.HeartbeatWait = c.CapabilityLease }, "groups.heartbeat_wait:"},
		{"broker", func(c *coordinator.Config) { c.Broker.Seeds = nil }, "broker.seeds:"},
	} {
		cfg := coordinator.DefaultConfig()
		tc.mutate(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error starting %q", tc.name, err, tc.want)
		}
	}
}

func TestGenerateSecret(t *testing.T) {
	token, hash, err := coordinator.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	if len(hash) != 64 || coordinator.HashSecret(token) != hash || strings.Contains(hash, token) {
		t.Fatalf("token/hash mismatch: %q %q", token, hash)
	}
	other, _, _ := coordinator.GenerateSecret()
	if other == token {
		t.Fatal("two secrets are equal")
	}
}
