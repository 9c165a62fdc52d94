package coordinator_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestClientCredentialOps: POST /v1/admin/clients mints what ops asks
// for, least privilege by default — no ops is consume alone (the token
// carries no op claim, as credentials minted before ops did); consume and
// produce is the op claim. An op that is not a client credential's
// (fetch, a made-up one), produce without consume, produce without a
// topic named exactly, too many entries, or ops that is not a list are
// 400 bad_request with the JSON error body naming the problem, and
// nothing is minted.
func TestClientCredentialOps(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	h := e.start(t)
	mint := func(req coordinator.ClientRequest) (coordinator.ClientResponse, map[string]any) {
		t.Helper()
		var out coordinator.ClientResponse
		h.call(t, "POST", "/v1/admin/clients", e.adminToken, req, 200, &out)
		e.remember(out.Credential)
		return out, claimsOf(t, out.Credential)
	}

	out, claims := mint(coordinator.ClientRequest{Name: "reader", Groups: []string{"g"}, Topics: []string{"orders"}})
	if fmt.Sprint(out.Ops) != "[consume]" || claims["op"] != nil {
		t.Fatalf("no ops: answered ops %v, claims %v; want consume only and no op claim", out.Ops, claims)
	}
	out, claims = mint(coordinator.ClientRequest{Name: "reader2", Groups: []string{"g"}, Topics: []string{"orders"}, Ops: []string{"consume"}})
	if fmt.Sprint(out.Ops) != "[consume]" || claims["op"] != nil {
		t.Fatalf("ops [consume]: answered ops %v, claims %v", out.Ops, claims)
	}
	out, claims = mint(coordinator.ClientRequest{Name: "writer", Groups: []string{"g"}, Topics: []string{"orders", "logs-*"},
		Ops: []string{"produce", "consume"}})
	if fmt.Sprint(out.Ops) != "[consume produce]" || fmt.Sprint(claims["op"]) != "[consume produce]" {
		t.Fatalf("ops [produce consume]: answered ops %v, claims %v", out.Ops, claims)
	}
	h.join(t, "g", out.Credential, api.JoinRequest{ClientID: "w", Topics: []string{"orders"}}) // produce adds, consume stays

	for _, tc := range []struct {
		name string
		body any
		want string // in the message
	}{
		{"fetch is a capability's op", coordinator.ClientRequest{Name: "x", Groups: []string{"g"}, Topics: []string{"orders"}, Ops: []string{"consume", "fetch"}}, `"fetch"`},
		{"made-up op", coordinator.ClientRequest{Name: "x", Groups: []string{"g"}, Topics: []string{"orders"}, Ops: []string{"write"}}, "consume, produce"},
		{"empty name", coordinator.ClientRequest{Name: "x", Groups: []string{"g"}, Topics: []string{"orders"}, Ops: []string{""}}, "unknown op"},
		{"produce without consume", coordinator.ClientRequest{Name: "x", Groups: []string{"g"}, Topics: []string{"orders"}, Ops: []string{"produce"}}, "consume is required"},
		{"produce with any topic", coordinator.ClientRequest{Name: "x", Groups: []string{"g"}, Ops: []string{"consume", "produce"}}, "named exactly"},
		{"produce with patterns only", coordinator.ClientRequest{Name: "x", Groups: []string{"g"}, Topics: []string{"orders-*", "*"}, Ops: []string{"consume", "produce"}}, "named exactly"},
		{"too many entries", coordinator.ClientRequest{Name: "x", Groups: []string{"g"}, Topics: []string{"orders"}, Ops: strings.Fields(strings.Repeat("consume ", 9))}, "at most 8"},
		{"ops not a list", map[string]any{"name": "x", "groups": []string{"g"}, "topics": []string{"orders"}, "ops": "consume,produce"}, "ops"},
	} {
		status, b, _ := h.do(t, "POST", "/v1/admin/clients", e.adminToken, tc.body)
		var body api.ErrorBody
		if err := json.Unmarshal(b, &body); err != nil || status != 400 || body.Error.Code != api.CodeBadRequest || !strings.Contains(body.Error.Message, tc.want) {
			t.Errorf("%s: %d %s; want 400 bad_request saying %q", tc.name, status, b, tc.want)
		}
	}
}

// TestOAuthClientOps: an OAuth client is registered with ops like an
// admin-minted credential (default consume; checked the same way), shows
// them, and every credential it obtains carries them. A scope cannot
// turn a pattern of a producing client into an exact topic it may write.
func TestOAuthClientOps(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	h := e.start(t)
	register := func(req coordinator.OAuthClientRequest) coordinator.OAuthClientCreated {
		t.Helper()
		var created coordinator.OAuthClientCreated
		h.call(t, "POST", "/v1/admin/oauth/clients", e.adminToken, req, 200, &created)
		e.remember(created.ClientSecret)
		return created
	}
	token := func(c coordinator.OAuthClientCreated, scope string) (int, map[string]any) {
		t.Helper()
		form := clientCredentialsForm()
		if scope != "" {
			form.Set("scope", scope)
		}
		status, body, _ := tokenRequest(t, h, form, []string{c.ClientID, c.ClientSecret})
		if tok, ok := body["access_token"].(string); ok {
			e.remember(tok)
			return status, claimsOf(t, tok)
		}
		return status, body
	}

	reader := register(coordinator.OAuthClientRequest{Name: "reader", Groups: []string{"g"}, Topics: []string{"orders"}})
	if fmt.Sprint(reader.Ops) != "[consume]" {
		t.Fatalf("registered without ops: %v, want [consume]", reader.Ops)
	}
	if status, claims := token(reader, ""); status != 200 || claims["op"] != nil {
		t.Fatalf("reader's credential: %d %v, want no op claim (consume only)", status, claims)
	}

	writer := register(coordinator.OAuthClientRequest{Name: "writer", Groups: []string{"g"}, Topics: []string{"orders", "logs-*"},
		Ops: []string{"consume", "produce"}})
	if fmt.Sprint(writer.Ops) != "[consume produce]" {
		t.Fatalf("registered with ops: %v", writer.Ops)
	}
	if status, claims := token(writer, ""); status != 200 || fmt.Sprint(claims["op"]) != "[consume produce]" {
		t.Fatalf("writer's credential: %d %v", status, claims)
	}
	if status, claims := token(writer, "topic:orders topic:logs-*"); status != 200 || fmt.Sprint(claims["op"]) != "[consume produce]" {
		t.Fatalf("writer's scoped credential: %d %v", status, claims)
	}
	if status, body := token(writer, "topic:logs-eu"); status != 400 || body["error"] != "invalid_scope" {
		t.Fatalf("scope naming logs-eu exactly (only the pattern logs-* registered, with produce): %d %v, want 400 invalid_scope", status, body)
	}
	var list coordinator.OAuthClientsResponse
	h.call(t, "GET", "/v1/admin/oauth/clients", e.adminToken, nil, 200, &list)
	for _, c := range list.Clients {
		if want := map[string]string{reader.ClientID: "[consume]", writer.ClientID: "[consume produce]"}[c.ClientID]; fmt.Sprint(c.Ops) != want {
			t.Fatalf("listed %s with ops %v, want %s", c.ClientID, c.Ops, want)
		}
	}
	h.expectError(t, "POST", "/v1/admin/oauth/clients", e.adminToken,
		coordinator.OAuthClientRequest{Name: "bad", Groups: []string{"g"}, Topics: []string{"orders"}, Ops: []string{"consume", "commit"}}, 400, api.CodeBadRequest)
	h.expectError(t, "POST", "/v1/admin/oauth/clients", e.adminToken,
		coordinator.OAuthClientRequest{Name: "bad", Groups: []string{"g"}, Topics: []string{"*"}, Ops: []string{"consume", "produce"}}, 400, api.CodeBadRequest)
}
