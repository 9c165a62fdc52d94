package tenants_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/e2e/sdk"
)

// rawRequest writes one HTTP/1.1 request as given to the server at base
// (an http:// URL) and returns the status and body of the answer.
func rawRequest(t *testing.T, base, request string) (int, []byte) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// TestFoldedAuthorizationRefused: a header continued on the next line
// (obs-fold) was joined by the HTTP parser and accepted, so an
// Authorization value could be assembled across lines that an
// intermediary read differently. Both processes now refuse the request
// with 400 and a JSON error body; the same request unfolded is served.
func TestFoldedAuthorizationRefused(t *testing.T) {
	t.Parallel()
	c, _, m := soloMember(t, 1)
	capability := m.grants[0][0].Capability
	cases := []struct {
		name, base, line, token string
	}{
		{"coordinator offsets", c.CoordinatorURL, "GET /v1/groups/g/offsets HTTP/1.1", m.token},
		{"gateway fetch", c.GatewayURLs()[0], fmt.Sprintf("GET /v1/topics/%s/partitions/0/records?offset=0&max_wait_ms=0 HTTP/1.1", c.Topic), capability},
	}
	for _, tc := range cases {
		plain := fmt.Sprintf("%s\r\nHost: x\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", tc.line, tc.token)
		if status, body := rawRequest(t, tc.base, plain); status != http.StatusOK {
			t.Fatalf("%s unfolded: %d %s", tc.name, status, body)
		}
		folded := fmt.Sprintf("%s\r\nHost: x\r\nAuthorization: Bearer\r\n %s\r\nConnection: close\r\n\r\n", tc.line, tc.token)
		status, body := rawRequest(t, tc.base, folded)
		if status != http.StatusBadRequest || codeOf(body) != api.CodeBadRequest {
			t.Errorf("%s with a folded Authorization: %d %.120s, want 400 bad_request", tc.name, status, body)
		}
	}
}

// TestCoordinatorAcceptsOnlyJSON: the coordinator read any body as JSON,
// whatever its Content-Type, so a text/plain or form post (which a
// browser sends cross-site without a preflight) was served. Now every
// JSON route answers 415 unsupported_media_type with a JSON error body.
func TestCoordinatorAcceptsOnlyJSON(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 1})
	cl := client{c}
	cred, _ := cl.credential(t, "svc", "g")
	body, _ := json.Marshal(api.JoinRequest{Topics: []string{c.Topic}})
	for _, contentType := range []string{"text/plain", "application/x-www-form-urlencoded", ""} {
		req := fmt.Sprintf("POST /v1/groups/g/join HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n", cred)
		if contentType != "" {
			req += "Content-Type: " + contentType + "\r\n"
		}
		req += fmt.Sprintf("Content-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		status, answer := rawRequest(t, c.CoordinatorURL, req)
		if status != http.StatusUnsupportedMediaType || codeOf(answer) != api.CodeUnsupportedMediaType {
			t.Errorf("join with Content-Type %q: %d %.120s, want 415 unsupported_media_type", contentType, status, answer)
		}
	}
	req := fmt.Sprintf("POST /v1/groups/g/join HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		cred, len(body), body)
	if status, answer := rawRequest(t, c.CoordinatorURL, req); status != http.StatusOK {
		t.Errorf("join with application/json; charset=utf-8: %d %s", status, answer)
	}
}
