package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestAdminTablesPrintTimesAndListsPlainly (newuser polish): a denied
// jti's exp and a QoS override's until were unix seconds in tables where
// every other answer prints RFC 3339; `oauth-client list` printed
// "CLIENTS  -" when empty and a blank line and a lone CLIENTS title over
// its table otherwise (its columns sorted by name, the ttl in ms).
func TestAdminTablesPrintTimesAndListsPlainly(t *testing.T) {
	base, admin := startCoordinator(t)
	table := func(args ...string) string {
		t.Helper()
		out, err := run(t, append(append([]string{"admin"}, args...), "--coordinator", base, "--token", admin, "-o", "table")...)
		if err != nil {
			t.Fatalf("admin %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	rfc3339 := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`
	for what, c := range map[string]struct {
		out, want string
	}{
		"revoke-capability":       {table("revoke-capability", "AAAAAAAAAAAAAAAAAAAAAA"), `(?m)^EXP\s+` + rfc3339 + `$`},
		"qos":                     {table("qos", "--group", "billing", "--log-level", "debug", "--ttl", "1m"), `(?m)^\S+\s+group=billing\s+debug\s+-\s+0\s+` + rfc3339 + `$`},
		"oauth-client list, none": {table("oauth-client", "list"), `^CLIENT-ID\s+NAME\s+GROUPS\s+TOPICS\s+OPS\s+TOKEN-TTL\s+LIVE-TOKENS\s+CREATED\s+REVOKED-AT\n$`},
	} {
		if !regexp.MustCompile(c.want).MatchString(c.out) {
			t.Errorf("%s -o table printed %q, want %s", what, c.out, c.want)
		}
	}
	table("oauth-client", "create", "--name", "svc", "--groups", "billing", "--topics", "orders", "--token-ttl", "90s")
	out := table("oauth-client", "list")
	if !regexp.MustCompile(`^CLIENT-ID\s+NAME\s+.*\n\S+\s+svc\s+billing\s+orders\s+consume\s+1m30s\s+0\s+\S+\s+-\n$`).MatchString(out) {
		t.Errorf("oauth-client list -o table printed %q, want the table alone", out)
	}
	// JSON keeps the API's numbers.
	out, err := run(t, "admin", "revoke-capability", "BBBBBBBBBBBBBBBBBBBBBB", "--coordinator", base, "--token", admin, "-o", "json")
	var denied struct{ Exp json.Number }
	if err != nil || json.Unmarshal([]byte(out), &denied) != nil || !regexp.MustCompile(`^\d+$`).MatchString(string(denied.Exp)) {
		t.Errorf("revoke-capability -o json: %v %s", err, out)
	}
}

// TestTokenInspectVerifiesAgainstTheKnownCoordinator (newuser polish):
// `token inspect` only decoded unless --jwks was given, though
// $CAPGATE_COORDINATOR_URL (credentials.env) names the coordinator; a
// token that verified printed "verify_error": "".
func TestTokenInspectVerifiesAgainstTheKnownCoordinator(t *testing.T) {
	base, admin := startCoordinator(t)
	out, err := run(t, "admin", "client-credential", "--name", "svc", "--groups", "billing", "--coordinator", base, "--token", admin, "-o", "json")
	var cred struct {
		Credential string `json:"client_credential"`
	}
	if err != nil || json.Unmarshal([]byte(out), &cred) != nil {
		t.Fatalf("client-credential: %v %s", err, out)
	}
	t.Setenv("CAPGATE_COORDINATOR_URL", base+"/")
	out, err = run(t, "token", "inspect", cred.Credential)
	var got map[string]any
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || got["verified"] != true || got["jwks"] != base+"/.well-known/jwks.json" {
		t.Fatalf("token inspect with CAPGATE_COORDINATOR_URL: %v\n%s", err, out)
	}
	if _, ok := got["verify_error"]; ok {
		t.Errorf("a verified token printed verify_error: %s", out)
	}
	out, err = run(t, "token", "inspect", "--jwks", "none", cred.Credential)
	got = nil
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || got["verified"] != nil || got["claims"] == nil {
		t.Errorf("token inspect --jwks none: %v\n%s, want the claims only", err, out)
	}
}

// TestKeysSecretSaysWhereTheHashGoes (newuser polish): `keys secret`
// printed a token and a hash without the config key that takes it.
func TestKeysSecretSaysWhereTheHashGoes(t *testing.T) {
	out, err := run(t, "keys", "secret")
	if err != nil || !regexp.MustCompile(`^token: \S{20,}\nhash:  [0-9a-f]{64}\n`).MatchString(out) ||
		!strings.Contains(out, "coordinator.admin_token_hashes") || !strings.Contains(out, "coordinator.sync_token_hashes") {
		t.Errorf("keys secret printed %q (%v)", out, err)
	}
	help, _ := run(t, "--help")
	if !strings.Contains(help, "admin/sync tokens") {
		t.Errorf("capgate --help does not say keys makes the admin/sync tokens:\n%s", help)
	}
}

// TestAdminConfigWithoutSettingsShowsThem (newuser #14): `admin config
// GROUP` refused ("nothing to change"), and nothing but the describe's
// JSON showed a group's handoff or session timeout. It prints the
// settings now, as a change prints them.
func TestAdminConfigWithoutSettingsShowsThem(t *testing.T) {
	base, admin := startCoordinator(t)
	flags := []string{"--coordinator", base, "--token", admin}
	out, err := run(t, append([]string{"admin", "config", "billing", "--max-moves-per-second", "2", "--handoff-timeout", "5s", "-o", "table"}, flags...)...)
	if err != nil || !regexp.MustCompile(`(?m)^HANDOFF-TIMEOUT\s+5s$`).MatchString(out) {
		t.Fatalf("admin config billing --handoff-timeout 5s -o table: %v\n%s", err, out)
	}
	out, err = run(t, append([]string{"admin", "config", "billing", "-o", "table"}, flags...)...)
	for _, want := range []string{`(?m)^ASSIGNOR\s+\S+$`, `(?m)^SESSION-TIMEOUT\s+\d`, `(?m)^HANDOFF-TIMEOUT\s+5s$`, `(?m)^MAX-MOVES-PER-SECOND\s+2$`, `(?m)^OFFSET-RESET\s+earliest$`} {
		if err != nil || !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("admin config billing -o table: %v\n%s\nwant %s", err, out, want)
		}
	}
	out, err = run(t, append([]string{"admin", "config", "billing", "-o", "json"}, flags...)...)
	var cfg struct {
		HandoffTimeoutMs  int64 `json:"handoff_timeout_ms"`
		MaxMovesPerSecond int   `json:"max_moves_per_second"`
	}
	if err != nil || json.Unmarshal([]byte(out), &cfg) != nil || cfg.HandoffTimeoutMs != 5000 || cfg.MaxMovesPerSecond != 2 {
		t.Errorf("admin config billing -o json: %v\n%s", err, out)
	}
	if _, err := run(t, append([]string{"admin", "config", "nosuch"}, flags...)...); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("admin config of an unknown group: %v", err)
	}
	help, _ := run(t, "admin", "lease", "--help")
	if !strings.Contains(help, "lives at most max_lease") || !strings.Contains(help, "runs lease again") {
		t.Errorf("admin lease --help does not say the capability lives at most max_lease and how to renew it:\n%s", help)
	}
}

// TestAdminHelpSaysWhatHappens (newuser #1, #2, doc nits): `admin audit`
// did not say its log lives in memory since the coordinator started;
// `revoke-member` did not say the client rejoins and how to keep it out;
// `keys rotate` did not say it is `admin rotate-keys`, nor the other way
// round.
func TestAdminHelpSaysWhatHappens(t *testing.T) {
	for args, want := range map[string][]string{
		"admin audit --help":         {"kept in memory", "a restart starts it empty again", `"admin action" line`},
		"admin revoke-member --help": {"It does not stop the client", "joins again as a new member", "capgate admin revoke-capability JTI"},
		"keys rotate --help":         {"The same operation as capgate admin rotate-keys"},
		"admin rotate-keys --help":   {"The same operation as capgate keys rotate", "second rotation"},
	} {
		out, err := run(t, strings.Fields(args)...)
		for _, w := range want {
			if err != nil || !strings.Contains(out, w) {
				t.Errorf("capgate %s: %v, does not say %q:\n%s", args, err, w, out)
			}
		}
	}
}
