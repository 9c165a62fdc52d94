package coordinator_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// refusedBody sends body and requires 400 bad_request with the message
// decodeBody gives for a body api.StrictJSON refuses with problem (the
// test goes on, so one run lists every body let through).
func (h *harness) refusedBody(t *testing.T, method, path, token, body, problem string) {
	t.Helper()
	status, b, _ := h.do(t, method, path, token, body)
	var out api.ErrorBody
	if err := json.Unmarshal(b, &out); err != nil || status != 400 || out.Error.Code != api.CodeBadRequest ||
		out.Error.Message != "invalid JSON body: "+problem {
		t.Errorf("%s %s %s: got %d %.300s, want 400 bad_request %q", method, path, body, status, b, problem)
	}
}

// TestJSONBodiesStrict is the red team's finding over HTTP: a join whose
// keys differ from the documented names only in case, and one naming
// "topics" twice (a proxy checking the first would pass what the
// coordinator decoded from the second), joined with 200. Each is 400 now,
// naming the key, and changes nothing; so are a key repeated or in
// another case inside a commit's offsets item, in a heartbeat and in an
// admin group config, sent directly or as a console action; the bodies as
// the SDK and the CLI send them pass.
func TestJSONBodiesStrict(t *testing.T) {
	e := newEnv(t, map[string]int32{"demo": 1})
	e.fill(t, 10)
	h := e.start(t)
	creds := h.clientCredential(t, []string{"g", "h"}, []string{"demo"})
	join := "/v1/groups/g/join"

	h.refusedBody(t, "POST", join, creds, `{"TOPICS":["demo"],"Session_Timeout_MS":300000}`,
		`unknown field "TOPICS" (did you mean "topics"?)`)
	h.refusedBody(t, "POST", join, creds, `{"topics":["nosuch"],"topics":["demo"]}`, `duplicate key "topics"`)
	h.refusedBody(t, "POST", join, creds, `{"topics":["demo"],"top\u0069cs":["demo"]}`, `duplicate key "topics"`)
	h.refusedBody(t, "POST", join, creds, `{"topics":["demo"],"session_timeout_MS":300000}`,
		`unknown field "session_timeout_MS" (did you mean "session_timeout_ms"?)`)
	if status, b, _ := h.do(t, "GET", "/v1/admin/groups/g", e.adminToken, nil); status != 404 {
		t.Errorf("refused joins made the group: %d %.300s", status, b) // no member, no group
	}

	// The routes below are driven in group h, so they run (and fail
	// alone) even when the refused joins got into g.
	m := h.join(t, "h", creds, api.JoinRequest{ClientID: "svc", Topics: []string{"demo"}, SessionTimeoutMs: 30000})
	var g api.Grant
	eventually(t, func() string {
		var ok bool
		if g, ok = m.grant("demo", 0); !ok {
			m.heartbeat(t, 100)
			return "no grant of demo/0"
		}
		return ""
	})

	t.Run("commit offsets item", func(t *testing.T) {
		commit := "/v1/groups/h/commit"
		offsets := func(items ...string) string {
			for i, fields := range items {
				items[i] = fmt.Sprintf(`{"topic":"demo","partition":0,"capability":%q%s}`, g.Capability, fields)
			}
			return `{"offsets":[` + strings.Join(items, ",") + `]`
		}
		h.refusedBody(t, "POST", commit, m.token, offsets(`,"offset":1,"offset":5`)+`}`, `duplicate key "offset" in offsets[0]`)
		h.refusedBody(t, "POST", commit, m.token, offsets(`,"offset":1`, `,"Offset":5`)+`}`,
			`unknown field "Offset" in offsets[1] (did you mean "offset"?)`)
		h.refusedBody(t, "POST", commit, m.token, offsets(`,"offset":5`)+`,"release":false,"release":true}`, `duplicate key "release"`)
		var committed api.OffsetsResponse
		h.call(t, "GET", "/v1/groups/h/offsets", e.adminToken, nil, 200, &committed)
		if len(committed.Offsets) != 0 {
			t.Errorf("a refused commit committed: %+v", committed.Offsets)
		}
		h.call(t, "POST", commit, m.token, offsets(`,"offset":1,"metadata":"m"`)+`}`, 200, nil)
		h.call(t, "GET", "/v1/groups/h/offsets", e.adminToken, nil, 200, &committed)
		if !slices.Equal(committed.Offsets, []api.CommittedOffset{{Topic: "demo", Partition: 0, Offset: 1, Metadata: "m"}}) {
			t.Fatalf("offsets: %+v", committed.Offsets)
		}
	})

	t.Run("heartbeat", func(t *testing.T) {
		h.refusedBody(t, "POST", "/v1/groups/h/heartbeat", m.token, `{"wait_ms":0,"wait_ms":0}`, `duplicate key "wait_ms"`)
		h.refusedBody(t, "POST", "/v1/groups/h/heartbeat", m.token, `{"Wait_MS":0}`, `unknown field "Wait_MS" (did you mean "wait_ms"?)`)
		m.heartbeat(t, 1)
	})

	t.Run("group config", func(t *testing.T) {
		path := "/v1/admin/groups/h/config"
		before := h.describe(t, "h").Config
		h.refusedBody(t, "PUT", path, e.adminToken, `{"max_moves_per_second":3,"MAX_MOVES_PER_SECOND":9}`,
			`unknown field "MAX_MOVES_PER_SECOND" (did you mean "max_moves_per_second"?)`)
		h.refusedBody(t, "PUT", path, e.adminToken, `{"handoff_timeout_ms":1000,"handoff_timeout_ms":60000}`,
			`duplicate key "handoff_timeout_ms"`)
		console := newConsoleClient(t, h) // its actions reach the same handler
		if a := console.login(e.adminToken, nil); a.status != 303 {
			t.Fatalf("console login: %d", a.status)
		}
		a := console.action("PUT", path, console.csrf(), console.origin, json.RawMessage(`{"max_moves_per_second":3,"max_moves_per_second":9}`))
		if a.status != 400 || !strings.Contains(a.body, `invalid JSON body: duplicate key \"max_moves_per_second\"`) {
			t.Errorf("console: got %d %.300s, want 400 duplicate key", a.status, a.body)
		}
		if after := h.describe(t, "h").Config; after != before {
			t.Errorf("refused configs changed %+v to %+v", before, after)
		}
		moves := 3
		var cfg coordinator.GroupConfigView
		h.call(t, "PUT", path, e.adminToken, coordinator.GroupConfigRequest{MaxMovesPerSecond: &moves}, 200, &cfg)
		if cfg.MaxMovesPerSecond != 3 {
			t.Fatalf("config: %+v", cfg)
		}
	})
}

// TestOAuthBodiesStrict: the OAuth endpoints read their bodies as the
// JSON ones do. Registering a client is JSON (decodeBody): a repeated or
// case-variant key is 400 and registers nothing. The token endpoint's
// form already was: a repeated parameter is 400 invalid_request (a proxy
// may read the other one), and names are exact: "GRANT_TYPE" or
// "Client_Secret" are not the parameters (unrecognized ones are ignored,
// RFC 6749 §3.2), so the request lacks them. This part guards what was
// there; the registrations are the change.
func TestOAuthBodiesStrict(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	clients := "/v1/admin/oauth/clients"
	h.refusedBody(t, "POST", clients, e.adminToken, `{"name":"a","groups":["g"],"topics":["orders"],"groups":["*"]}`, `duplicate key "groups"`)
	h.refusedBody(t, "POST", clients, e.adminToken, `{"name":"a","Groups":["*"],"topics":["orders"]}`, `unknown field "Groups" (did you mean "groups"?)`)
	var list coordinator.OAuthClientsResponse
	if h.call(t, "GET", clients, e.adminToken, nil, 200, &list); len(list.Clients) != 0 {
		t.Errorf("refused registrations registered %+v", list.Clients)
	}
	c := createOAuthClient(t, h, "billing", []string{"g"})
	for _, tc := range []struct {
		name        string
		form        url.Values
		status      int
		error, desc string
	}{
		{"repeated secret", url.Values{"grant_type": {"client_credentials"}, "client_id": {c.ClientID}, "client_secret": {"wrong", c.ClientSecret}},
			400, "invalid_request", "parameter client_secret repeated"},
		{"repeated scope", url.Values{"grant_type": {"client_credentials"}, "client_id": {c.ClientID}, "client_secret": {c.ClientSecret}, "scope": {"group:g", "group:*"}},
			400, "invalid_request", "parameter scope repeated"},
		{"grant type in capitals", url.Values{"GRANT_TYPE": {"client_credentials"}, "client_id": {c.ClientID}, "client_secret": {c.ClientSecret}},
			400, "invalid_request", "grant_type required"},
		{"secret in another case", url.Values{"grant_type": {"client_credentials"}, "client_id": {c.ClientID}, "Client_Secret": {c.ClientSecret}},
			401, "invalid_client", "client authentication required"},
	} {
		status, body, _ := tokenRequest(t, h, tc.form, nil)
		if status != tc.status || body["error"] != tc.error || body["error_description"] != tc.desc {
			t.Errorf("%s: got %d %v, want %d %s %q", tc.name, status, body, tc.status, tc.error, tc.desc)
		}
	}
	if status, body, _ := tokenRequest(t, h, clientCredentialsForm("client_id", c.ClientID, "client_secret", c.ClientSecret), nil); status != 200 {
		t.Fatalf("the right form: %d %v", status, body)
	}
}

// TestContentCodingRefused: a JSON body under a content coding other than
// identity is 415 unsupported_media_type with Accept-Encoding: identity,
// and nothing happens — a join labelled gzip joined with 200 (the label
// ignored, the body read as plain JSON), while a proxy in front may have
// read it as gzip.
func TestContentCodingRefused(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	body := `{"topics":["orders"]}`
	for _, coding := range []string{"gzip", "br", "identity, gzip"} {
		req, err := http.NewRequest("POST", h.base+"/v1/groups/g/join", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+creds)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", coding)
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 415 || errorCode(t, b) != api.CodeUnsupportedMediaType || resp.Header.Get("Accept-Encoding") != "identity" {
			t.Fatalf("join with Content-Encoding %q: %d %s (Accept-Encoding %q), want 415 unsupported_media_type", coding, resp.StatusCode, b, resp.Header.Get("Accept-Encoding"))
		}
	}
	if status, b, _ := h.do(t, "GET", "/v1/admin/groups/g", e.adminToken, nil); status != 404 {
		t.Fatalf("the refused joins made group g: %d %s", status, b)
	}
	h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}}) // identity still joins
}
