package gateway

import (
	"net/http"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
)

// TestRecordsRoutesAuthenticateFirst: a request with no bearer token is
// 401 on every records route whatever its path, query or body — not a
// 400 naming what it got wrong, which told a stranger how the route
// parses before it said the route authenticates (newuser14's walk: a
// fetch with no token and no offset was 400 "offset is required").
func TestRecordsRoutesAuthenticateFirst(t *testing.T) {
	h := newHarness(t, nil)
	for _, tc := range []struct {
		name, method, path, body string
		header                   []string
	}{
		{"fetch without offset", http.MethodGet, recordsURL(0), "", nil},
		{"fetch of a bad partition", http.MethodGet, "/v1/topics/orders/partitions/x/records?offset=0", "", nil},
		{"fetch with an unknown parameter", http.MethodGet, recordsPath(0, "offset=0&zzz=1"), "", nil},
		{"fetch with basic auth", http.MethodGet, recordsURL(0), "", []string{"Authorization", "Basic dXNlcjpwYXNz"}},
		{"produce with a bad body", http.MethodPost, recordsURL(0), "{not json", []string{"Content-Type", "application/json"}},
		{"produce to a bad partition", http.MethodPost, "/v1/topics/orders/partitions/-1/records", "{}", []string{"Content-Type", "application/json"}},
		{"produce to a bad topic", http.MethodPost, "/v1/topics/.../records", "{}", []string{"Content-Type", "application/json"}},
		{"produce to a topic with a bad body", http.MethodPost, "/v1/topics/orders/records", "{not json", []string{"Content-Type", "application/json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(tc.method, tc.path, "", strings.NewReader(tc.body), tc.header...)
			expectError(t, r, http.StatusUnauthorized, api.CodeUnauthorized)
		})
	}
	// With a token the same mistakes are named (400), as before.
	tok, _ := h.mint(capClaims(0))
	r := h.get(tok, recordsURL(0))
	expectError(t, r, http.StatusBadRequest, api.CodeBadRequest)
}
