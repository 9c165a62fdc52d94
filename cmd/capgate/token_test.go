package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/capgate/capgate/internal/coordinators/coordinatorstest"
)

// TestTokenInspectTakesTheTokensKind: `token inspect --jwks` verified
// every token as a capability unless --kind said otherwise, so a client
// credential "did not verify" (wrong token type). The kind is the
// token's typ now; --kind still insists.
func TestTokenInspectTakesTheTokensKind(t *testing.T) {
	base, admin := startCoordinator(t)
	out, err := run(t, "admin", "client-credential", "--name", "svc", "--groups", "billing", "--coordinator", base, "--token", admin)
	var cred struct {
		ClientCredential string `json:"client_credential"`
	}
	if err != nil || json.Unmarshal([]byte(out), &cred) != nil || cred.ClientCredential == "" {
		t.Fatalf("client-credential: %v %s", err, out)
	}
	jwks := base + "/.well-known/jwks.json"
	out, err = run(t, "token", "inspect", "--jwks", jwks, cred.ClientCredential)
	var got struct {
		Verified *bool `json:"verified"`
	}
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || got.Verified == nil || !*got.Verified {
		t.Fatalf("a client credential without --kind: %v\n%s", err, out)
	}
	_, err = run(t, "token", "inspect", "--jwks", jwks, "--kind", "capgate+jwt", cred.ClientCredential)
	if err == nil || !strings.Contains(err.Error(), "did not verify") || !strings.Contains(err.Error(), "a client credential (typ") {
		t.Fatalf("--kind capgate+jwt on a client credential: %v", err)
	}

	// A JWKS that cannot be read is not a token that did not verify.
	closed := coordinatorstest.Down(t) + "/.well-known/jwks.json"
	for src, want := range map[string]string{closed: "connection refused", base + "/nope.json": "404"} {
		out, err := run(t, "token", "inspect", "--jwks", src, cred.ClientCredential)
		if err == nil || strings.Contains(err.Error(), "did not verify") || !strings.Contains(err.Error(), "fetching the JWKS failed") || !strings.Contains(err.Error(), want) {
			t.Errorf("--jwks %s: %v, want the fetch failure (%s)", src, err, want)
		}
		var printed map[string]any
		if json.Unmarshal([]byte(out), &printed) != nil || printed["jwks_error"] == nil || printed["verified"] != nil || printed["claims"] == nil {
			t.Errorf("--jwks %s printed %s, want the claims and jwks_error, no verified", src, out)
		}
	}
}

// TestAdminGrantNeedsItsFlags: without --holder the grant went to the
// coordinator and came back as its 400 about a JSON field; it is a
// required-flag error now, before anything is sent (the coordinator
// named here does not exist), and a usage error (exit 2).
func TestAdminGrantNeedsItsFlags(t *testing.T) {
	for missing, args := range map[string][]string{
		"holder":    {"--topic", "t", "--partition", "1"},
		"partition": {"--topic", "t", "--holder", "h"},
		"topic":     {"--partition", "1", "--holder", "h"},
	} {
		_, err := run(t, append([]string{"admin", "grant", "--coordinator", "http://127.0.0.1:1", "--token", "x"}, args...)...)
		if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), "--"+missing+" is required (see capgate admin grant --help)") {
			t.Errorf("grant without --%s: %v", missing, err)
		}
	}
}

// TestTokenInspectSaysWhatIsNoJWT: an empty token (an unset variable)
// and the admin token (an opaque secret) were both "not a JWT: 1
// segments" (newuser5); each says what it is, exit 1.
func TestTokenInspectSaysWhatIsNoJWT(t *testing.T) {
	for token, want := range map[string]string{
		"":                       "empty token: nothing to inspect",
		"0N1ecFFAhn9WZOSPq3kuXy": "admin and sync tokens are opaque secrets",
		"a.b":                    "not a JWT: 2 dot-separated segments, want 3",
	} {
		_, err := run(t, "token", "inspect", "--jwks", "none", token)
		if err == nil || exitCode(err) != exitFailure || !strings.Contains(err.Error(), want) {
			t.Errorf("token inspect %q: %v, want exit 1 and %q", token, err, want)
		}
	}
}
