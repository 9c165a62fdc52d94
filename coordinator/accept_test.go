package coordinator_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
)

// TestAcceptNegotiation: the coordinator's API answers JSON only, so a
// client whose Accept refuses JSON — another type alone, a q=0 on JSON,
// on application/*, on */* — gets 406 not_acceptable naming
// application/json (a JSON error body all the same), on reads and on
// writes alike (the join below never happens). Types match
// case-insensitively; browsers' Accept takes JSON through */*. Not
// negotiated: the console (HTML) and /metrics; and routing comes first
// (404). Before: every Accept got JSON.
func TestAcceptNegotiation(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	cred := h.clientCredential(t, []string{"g"}, []string{"orders"})
	send := func(method, path, token, accept, body string) (int, string, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, h.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if body != "" {
			req.Header.Set("Content-Type", api.MediaJSON)
		}
		req.Header.Set("Accept", accept)
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), b
	}
	for _, c := range []struct {
		path, accept string
		want         int
	}{
		{"/v1/admin/groups", "application/json", 200},
		{"/v1/admin/groups", "APPLICATION/JSON", 200},
		{"/v1/admin/groups", " application/json ; q=0.1 ", 200},
		{"/v1/admin/groups", "application/*", 200},
		{"/v1/admin/groups", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", 200},
		{"/v1/admin/groups", "text/html", 406},
		{"/v1/admin/groups", "application/json;q=0", 406},
		{"/v1/admin/groups", "Application/Json; Q=0", 406},
		{"/v1/admin/groups", "*/*;q=0", 406},
		{"/v1/admin/groups", "application/*;q=0, text/*", 406},
		{"/v1/admin/groups", "*/*, application/json;q=0", 406},
		{"/healthz", "text/plain", 406},
		{"/.well-known/jwks.json", "application/jwk-set+json", 406},
		{"/openapi.json", "text/yaml", 406},
	} {
		status, ctype, body := send("GET", c.path, e.adminToken, c.accept, "")
		if status != c.want || ctype != api.MediaJSON {
			t.Errorf("GET %s Accept %q: %d %s %.100s, want %d application/json", c.path, c.accept, status, ctype, body, c.want)
			continue
		}
		var eb struct {
			Error struct {
				Code      api.Code
				Available []string
			} `json:"error"`
		}
		if c.want == 406 && (json.Unmarshal(body, &eb) != nil || eb.Error.Code != api.CodeNotAcceptable || len(eb.Error.Available) != 1 || eb.Error.Available[0] != api.MediaJSON) {
			t.Errorf("GET %s Accept %q: 406 body %s, want not_acceptable naming application/json", c.path, c.accept, body)
		}
	}
	if status, _, body := send("POST", "/v1/groups/g/join", cred, "text/html", `{"topics":["orders"]}`); status != 406 {
		t.Fatalf("join with Accept text/html: %d %s, want 406", status, body)
	}
	status, _, body := send("GET", "/v1/admin/groups/g", e.adminToken, "", "")
	if status != http.StatusNotFound {
		t.Fatalf("group g after a refused join: %d %s, want 404 (no such group)", status, body)
	}
	if status, _, _ := send("GET", "/console/login", "", "text/html", ""); status != http.StatusOK {
		t.Errorf("console login page with Accept text/html: %d, want 200", status)
	}
	if status, _, _ := send("GET", "/metrics", "", "text/html", ""); status != http.StatusOK {
		t.Errorf("/metrics with Accept text/html: %d, want 200", status)
	}
	if status, _, _ := send("GET", "/v2/nothing", "", "text/html", ""); status != http.StatusNotFound {
		t.Errorf("unknown route with Accept text/html: %d, want 404", status)
	}
}
