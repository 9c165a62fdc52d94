package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/capgate/capgate/tlsconf"
)

func TestCredentialsKeptAcrossStarts(t *testing.T) {
	dir := t.TempDir()
	first, err := loadOrMakeCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	if first.AdminToken == "" || first.SyncToken == "" || first.AdminToken == first.SyncToken {
		t.Fatalf("tokens %+v", first)
	}
	first.ClientCredential = "cred"
	if err := saveCredentials(dir, first, devEnv(first, tlsconf.ClientConfig{}, "http://c", "http://g")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{credentialsFile, credentialsEnvFile} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v, err %v; want 0600", name, st.Mode().Perm(), err)
		}
	}
	second, err := loadOrMakeCredentials(dir)
	if err != nil || second != first {
		t.Fatalf("reloaded %+v (err %v), want %+v", second, err, first)
	}
	// The admin CLI's secretFrom reads the same file.
	for key, want := range map[string]string{"admin_token": first.AdminToken, "client_credential": "cred", "sync_token": first.SyncToken} {
		if got, err := secretFrom("", filepath.Join(dir, credentialsFile), "", key); err != nil || got != want {
			t.Errorf("secretFrom %s = %q, %v", key, got, err)
		}
	}
	// And credentials.env, given where a file of the token is asked for
	// (--credential-file, --token-file): its whole text went out as the
	// token, "invalid header field value for Authorization" (newuser5).
	for env, want := range map[string]string{"CAPGATE_ADMIN_TOKEN": first.AdminToken, "CAPGATE_CREDENTIAL": "cred"} {
		if got, err := secretFrom("", filepath.Join(dir, credentialsEnvFile), env, "unused"); err != nil || got != want {
			t.Errorf("secretFrom credentials.env %s = %q, %v; want %q", env, got, err, want)
		}
	}
	if _, err := secretFrom("", filepath.Join(dir, credentialsEnvFile), "CAPGATE_SYNC_TOKEN", "unused"); err == nil ||
		!strings.Contains(err.Error(), "is not a token (it holds spaces or several lines) and sets no CAPGATE_SYNC_TOKEN") {
		t.Errorf("secretFrom credentials.env of a variable it does not set: %v", err)
	}
	env, _ := os.ReadFile(filepath.Join(dir, credentialsEnvFile))
	if !strings.Contains(string(env), "export CAPGATE_CREDENTIAL=cred\n") || !strings.Contains(string(env), "export CAPGATE_GATEWAY_URLS=http://g\n") {
		t.Fatalf("credentials.env:\n%s", env)
	}
	var raw map[string]any
	b, _ := os.ReadFile(filepath.Join(dir, credentialsFile))
	if err := json.Unmarshal(b, &raw); err != nil || len(raw) != 3 {
		t.Fatalf("credentials.json holds %v (err %v), want the 3 keys", raw, err)
	}
}

func TestLoopbackPort(t *testing.T) {
	for addr, want := range map[string]int{"127.0.0.1:9092": 9092, "localhost:0": 0} {
		if got, err := loopbackPort(addr); err != nil || got != want {
			t.Errorf("loopbackPort(%q) = %d, %v", addr, got, err)
		}
	}
	for _, bad := range []string{"0.0.0.0:9092", "127.0.0.1", "127.0.0.1:x", "127.0.0.1:70000"} {
		if _, err := loopbackPort(bad); err == nil {
			t.Errorf("loopbackPort(%q) accepted", bad)
		}
	}
}

// TestEveryFlagHasADescription keeps shell completion useful: cobra's
// completion shows each flag's usage next to it.
func TestEveryFlagHasADescription(t *testing.T) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Short == "" && c.Name() != "help" {
			t.Errorf("command %q has no short description", c.CommandPath())
		}
		check := func(fl *pflag.Flag) {
			if strings.TrimSpace(fl.Usage) == "" {
				t.Errorf("%s --%s has no description", c.CommandPath(), fl.Name)
			}
		}
		c.LocalFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	root := newRoot()
	root.InitDefaultCompletionCmd()
	walk(root)
}

func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		out, err := run(t, "completion", shell)
		if err != nil || !strings.Contains(out, "capgate") {
			t.Errorf("completion %s: %v (%d bytes)", shell, err, len(out))
		}
	}
	out, err := run(t, "__complete", "dev", "--demo-")
	if err != nil || !strings.Contains(out, "--demo-duration\thow long --demo runs") {
		t.Errorf("flag completion with descriptions: %v\n%s", err, out)
	}
}
