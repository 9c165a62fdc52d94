package coordinator_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
)

// TestLargeIdPTokenFitsTheHeaderLimit is redteam6 #8: an IdP token of
// 8–16 KiB (many groups, as Keycloak and Azure AD issue them) passed
// oidc.max_token_bytes (16 KiB) and still got 431 "request headers larger
// than 8192 bytes" from the default max_header_bytes. The default now
// carries the largest token accepted, and a configuration whose header
// limit cannot is refused at start, naming both settings.
func TestLargeIdPTokenFitsTheHeaderLimit(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	idp := idptest.New(t, "RS256")
	e.cfg.OIDC.Issuers = []identity.IssuerConfig{{
		Issuer: idp.URL, CAFile: idp.CAFile, Audiences: []string{"capgate"},
		Rules: []identity.Rule{{Claim: "groups", Value: "kafka-billing", Groups: []string{"billing-*"}, Topics: []string{"orders"}}},
	}}
	h := e.start(t)
	groups := []string{}
	for i := range 420 {
		groups = append(groups, fmt.Sprintf("directory-group-%04d", i))
	}
	now := time.Now()
	token := idp.Token(idptest.Claims{"sub": "svc-big", "aud": "capgate", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"groups": append(groups, "kafka-billing")})
	if len(token) < 12<<10 || len(token) > e.cfg.OIDC.MaxTokenBytes {
		t.Fatalf("token of %d bytes, want 12 KiB to oidc.max_token_bytes (%d)", len(token), e.cfg.OIDC.MaxTokenBytes)
	}
	e.remember(token)
	h.join(t, "billing-eu", token, api.JoinRequest{Topics: []string{"orders"}})
	// A token past the limit: the 431 names the setting to raise.
	status, body, _ := h.do(t, "GET", "/v1/admin/groups", strings.Repeat("x", e.cfg.MaxHeaderBytes), nil)
	if status != 431 || !strings.Contains(string(body), "coordinator.max_header_bytes") {
		t.Fatalf("headers over the limit: %d %s, want 431 naming coordinator.max_header_bytes", status, body)
	}

	cfg := e.cfg
	cfg.MaxHeaderBytes = 8 << 10
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "max_header_bytes") || !strings.Contains(err.Error(), "oidc.max_token_bytes (16384)") {
		t.Fatalf("max_header_bytes 8 KiB with oidc.max_token_bytes 16 KiB: %v, want a refusal naming both", err)
	}
	cfg.OIDC.Issuers = nil // capgate's own tokens alone: 4 KiB + room
	if err := cfg.Validate(); err != nil {
		t.Fatalf("max_header_bytes 8 KiB without issuers: %v", err)
	}
	cfg.MaxHeaderBytes = 5<<10 - 1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "max_header_bytes: must be >= 5120") {
		t.Fatalf("max_header_bytes 5119: %v, want must be >= 5120", err)
	}
}
