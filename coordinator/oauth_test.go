package coordinator_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// tokenRequest posts form to /oauth/token, with Basic id:secret when
// basic is set; it returns the status, the decoded body and the headers.
func tokenRequest(t *testing.T, h *harness, form url.Values, basic []string) (int, map[string]any, http.Header) {
	t.Helper()
	return tokenRequestVia(t, h, h.client, form, basic)
}

// tokenRequestVia is tokenRequest sent with client (e.g. from another
// source address: tokenClientFrom).
func tokenRequestVia(t *testing.T, h *harness, client *http.Client, form url.Values, basic []string) (int, map[string]any, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.base+"/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic != nil {
		req.SetBasicAuth(url.QueryEscape(basic[0]), url.QueryEscape(basic[1]))
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("token answer %d is not JSON: %s", resp.StatusCode, b)
	}
	return resp.StatusCode, out, resp.Header
}

func clientCredentialsForm(extra ...string) url.Values {
	v := url.Values{"grant_type": {"client_credentials"}}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	return v
}

func createOAuthClient(t *testing.T, h *harness, name string, groups []string) coordinator.OAuthClientCreated {
	t.Helper()
	var created coordinator.OAuthClientCreated
	h.call(t, "POST", "/v1/admin/oauth/clients", h.env.adminToken,
		coordinator.OAuthClientRequest{Name: name, Groups: groups, Topics: []string{"orders"}}, 200, &created)
	h.env.remember(created.ClientSecret)
	return created
}

// TestOAuthTokenEndpoint: a registered client gets a capgate client
// credential with Basic or form authentication and joins with it; the
// secret is stored only as a hash (a restart keeps the client, the store
// never holds the secret); the protocol errors are RFC 6749's.
func TestOAuthTokenEndpoint(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	h := e.start(t)
	created := createOAuthClient(t, h, "billing", []string{"billing-*"})
	if !strings.HasPrefix(created.ClientID, "cg-") || len(created.ClientSecret) < 40 {
		t.Fatalf("created %+v", created)
	}
	status, body, header := tokenRequest(t, h, clientCredentialsForm(), []string{created.ClientID, created.ClientSecret})
	if status != 200 || body["token_type"] != "Bearer" || header.Get("Cache-Control") != "no-store" {
		t.Fatalf("Basic: %d %v %v", status, body, header)
	}
	token := body["access_token"].(string)
	e.remember(token)
	if got := claimsOf(t, token); got["sub"] != "oauth:"+created.ClientID || got["iss"] != e.cfg.ID {
		t.Fatalf("credential claims %v", got)
	}
	if exp := body["expires_in"].(float64); exp < 3500 || exp > 3600 {
		t.Fatalf("expires_in %v, want oauth.token_ttl (1h)", exp)
	}
	h.join(t, "billing-eu", token, api.JoinRequest{Topics: []string{"orders"}})
	h.expectError(t, "POST", "/v1/groups/payments/join", token, api.JoinRequest{Topics: []string{"orders"}}, 403, api.CodeForbidden)

	// client_secret_post, and a scope narrowing it to one group.
	status, body, _ = tokenRequest(t, h, clientCredentialsForm("client_id", created.ClientID, "client_secret", created.ClientSecret, "scope", "group:billing-us"), nil)
	if status != 200 || body["scope"] != "group:billing-us" {
		t.Fatalf("form: %d %v", status, body)
	}
	narrow := body["access_token"].(string)
	e.remember(narrow)
	h.expectError(t, "POST", "/v1/groups/billing-eu/join", narrow, api.JoinRequest{Topics: []string{"orders"}}, 403, api.CodeForbidden)

	for _, c := range []struct {
		name   string
		form   url.Values
		basic  []string
		status int
		code   string
	}{
		{"both authentications", clientCredentialsForm("client_id", created.ClientID, "client_secret", created.ClientSecret), []string{created.ClientID, created.ClientSecret}, 400, "invalid_request"},
		{"no grant_type", url.Values{}, []string{created.ClientID, created.ClientSecret}, 400, "invalid_request"},
		{"password grant", url.Values{"grant_type": {"password"}}, []string{created.ClientID, created.ClientSecret}, 400, "unsupported_grant_type"},
		{"scope beyond the client's", clientCredentialsForm("scope", "group:payments"), []string{created.ClientID, created.ClientSecret}, 400, "invalid_scope"},
		{"no client authentication", clientCredentialsForm(), nil, 401, "invalid_client"},
	} {
		status, body, _ := tokenRequest(t, h, c.form, c.basic)
		if status != c.status || body["error"] != c.code {
			t.Errorf("%s: %d %v, want %d %s", c.name, status, body, c.status, c.code)
		}
	}

	h.stop(t)
	snap, err := coordinator.StoreOf(e.start(t).c).Load()
	if err != nil {
		t.Fatal(err)
	}
	for name, value := range snap.Meta {
		if strings.Contains(string(value), created.ClientSecret) {
			t.Fatalf("meta %s holds the client secret", name)
		}
	}
	e.checkLogs(t)
}

// TestOAuthClientAttacks: a wrong secret and an unknown client get the
// same 401 invalid_client (guessing is limited: oauth_lockout_test.go);
// a revoked client's secret is refused like a wrong one, the credentials
// it obtained are denied at join, and the members they opened are
// revoked — also after a restart.
func TestOAuthClientAttacks(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	h := e.start(t)
	victim := createOAuthClient(t, h, "victim", []string{"g"})
	other := createOAuthClient(t, h, "other", []string{"g"})
	right := []string{victim.ClientID, victim.ClientSecret}

	_, good, _ := tokenRequest(t, h, clientCredentialsForm(), right)
	token := good["access_token"].(string)
	e.remember(token)
	member := h.join(t, "g", token, api.JoinRequest{Topics: []string{"orders"}})

	wrong := []string{victim.ClientID, other.ClientSecret}
	unknown := []string{"cg-nosuchclient", victim.ClientSecret}
	_, wrongBody, wrongHeader := tokenRequest(t, h, clientCredentialsForm(), wrong)
	_, unknownBody, _ := tokenRequest(t, h, clientCredentialsForm(), unknown)
	if wrongBody["error"] != "invalid_client" || unknownBody["error"] != wrongBody["error"] || unknownBody["error_description"] != wrongBody["error_description"] {
		t.Fatalf("wrong secret %v and unknown client %v must be answered alike", wrongBody, unknownBody)
	}
	if !strings.HasPrefix(wrongHeader.Get("WWW-Authenticate"), "Basic") {
		t.Fatalf("401 after Basic without WWW-Authenticate: %v", wrongHeader)
	}

	var revoked coordinator.OAuthClientRevoked
	h.call(t, "POST", "/v1/admin/oauth/clients/"+victim.ClientID+"/revoke", e.adminToken, nil, 200, &revoked)
	if revoked.Denied != 1 {
		t.Fatalf("revoke denied %d credentials, want the 1 it obtained", revoked.Denied)
	}
	h.expectError(t, "POST", "/v1/groups/g/join", token, api.JoinRequest{Topics: []string{"orders"}}, 409, api.CodeCapabilityRevoked)
	h.expectError(t, "POST", "/v1/groups/g/heartbeat", member.token, api.HeartbeatRequest{}, 409, api.CodeUnknownMember)

	// After a restart (the limiter starts empty) the revoked client's
	// right secret is still refused, as an unknown client is.
	h.stop(t)
	h = e.start(t)
	status, body, _ := tokenRequest(t, h, clientCredentialsForm(), right)
	if status != 401 || body["error"] != "invalid_client" {
		t.Fatalf("revoked client after restart: %d %v, want 401 invalid_client", status, body)
	}
	h.expectError(t, "POST", "/v1/groups/g/join", token, api.JoinRequest{Topics: []string{"orders"}}, 409, api.CodeCapabilityRevoked)
	var list coordinator.OAuthClientsResponse
	h.call(t, "GET", "/v1/admin/oauth/clients", e.adminToken, nil, 200, &list)
	if len(list.Clients) != 2 || list.Clients[0].RevokedAt == "" && list.Clients[1].RevokedAt == "" {
		t.Fatalf("clients after restart %+v", list.Clients)
	}
	raw, _ := json.Marshal(list)
	if strings.Contains(string(raw), victim.ClientSecret) || strings.Contains(string(raw), other.ClientSecret) {
		t.Fatal("the client list shows a secret")
	}
	e.checkLogs(t)
}

func TestOAuthBasicCredentialsAreFormEncoded(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	created := createOAuthClient(t, h, "enc", []string{"g"})
	// RFC 6749 §2.3.1: id and secret are form-encoded before Basic; a
	// raw header with an unencoded ':' in the id is malformed for us
	// only if it does not decode — send a proper one by hand.
	req, _ := http.NewRequest(http.MethodPost, h.base+"/oauth/token", strings.NewReader("grant_type=client_credentials"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(created.ClientID)+":"+url.QueryEscape(created.ClientSecret))))
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("form-encoded Basic: %d", resp.StatusCode)
	}
	req.Header.Set("Authorization", "Basic !!!")
	req.Body = io.NopCloser(strings.NewReader("grant_type=client_credentials"))
	resp, err = h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("garbage Basic: %d, want 401", resp.StatusCode)
	}
}
