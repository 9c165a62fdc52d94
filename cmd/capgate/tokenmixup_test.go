package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/capgate/capgate/coordinator"
)

// TestTokenMixupsSayWhatToFix: the mistakes of a first production setup
// with `capgate keys secret` (newuser10). The token itself put in
// admin_token_hashes said "must be 64 hex characters (SHA-256), got 43
// characters"; a token whose hash the coordinator lacks said "not a known
// admin token" (the CLI) or "not a known sync token" (the gateway's
// warnings, every retry), naming no setting to compare it with.
func TestTokenMixupsSayWhatToFix(t *testing.T) {
	token, _, err := coordinator.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	for hashes, want := range map[string]string{
		"[" + token + "]": "admin_token_hashes[0]: must be 64 hex characters (SHA-256), got 43 characters: this looks like a token itself — the coordinator keeps only its hash: put the hash: line capgate keys secret printed with it here",
		"[abc]":           "admin_token_hashes[0]: must be 64 hex characters (SHA-256), got 3 characters: the SHA-256 of a token in hex, as the hash: line of capgate keys secret",
	} {
		if _, err := loadConfig(writeConfig(t, "coordinator:\n  admin_token_hashes: "+hashes+"\n"), "coordinator"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("admin_token_hashes: %s: %v, want %q", hashes, err, want)
		}
	}

	base, _ := startCoordinator(t)
	_, err = run(t, "admin", "groups", "--coordinator", base, "--token", token)
	if want := "admin token refused: not a known admin token: the coordinator's admin_token_hashes hold no SHA-256 of it (capgate keys secret prints a token and its hash"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("admin groups with an unknown token: %v, want %q", err, want)
	}
	req, err := http.NewRequest(http.MethodGet, base+"/v1/sync?gateway=g1&after=0&wait_ms=0", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "sync token refused: not a known sync token: the coordinator's sync_token_hashes hold no SHA-256 of it"; resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), want) {
		t.Errorf("a sync poll with an unknown token: %d %s, want 401 and %q", resp.StatusCode, body, want)
	}
}
