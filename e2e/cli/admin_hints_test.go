package cli_test

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAdminWrongURLSaysWhatToDo is newuser #4 against `capgate dev
// --tls` with the capgate binary: http:// to its TLS coordinator printed
// `Get "http://…": EOF`, no CA printed Go's x509 error, the gateway's URL
// as --coordinator asked two questions about two base URLs, then asked
// whether it was a coordinator when the gateway had said what it was
// (newuser12). Each now
// says what to do, and the right command works.
func TestAdminWrongURLSaysWhatToDo(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir(), "--tls")
	creds := filepath.Join(d.dataDir, "credentials.json")
	ca := filepath.Join(d.dataDir, "tls", "ca.crt")
	hostPort := strings.TrimPrefix(d.coordinator, "https://")
	for _, c := range []struct {
		name string
		args []string
		want []string
		not  string
	}{
		{"http to the TLS coordinator", []string{"--coordinator", "http://" + hostPort, "--cacert", ca},
			// The TLS listener answers plaintext itself (tlsconf/plaintext.go).
			[]string{"400 bad_request", "this port speaks TLS: use https://"}, "EOF"},
		{"no CA", []string{"--coordinator", d.coordinator},
			[]string{"x509: certificate signed by unknown authority", "pass --cacert FILE or set CAPGATE_CACERT"}, ""},
		{"the gateway's URL", []string{"--coordinator", d.gateway, "--cacert", ca},
			[]string{"404 not_found: no such route", d.gateway + " is a capgate gateway, not the coordinator: --coordinator takes the coordinator's base URL"}, "a capgate coordinator?"},
		{"HOST:PORT", []string{"--coordinator", hostPort, "--cacert", ca},
			[]string{"want a URL: use http://" + hostPort + " (or https://" + hostPort}, "client:"},
	} {
		_, stderr, err := cliResult(t, append([]string{"admin", "groups", "--token-file", creds}, c.args...)...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Errorf("%s: %v, want a failure", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr %q, want %q", c.name, stderr, w)
			}
		}
		if c.not != "" && strings.Contains(stderr, c.not) {
			t.Errorf("%s: stderr %q says %q", c.name, stderr, c.not)
		}
	}
	if out := run(t, 30*time.Second, "", "admin", "groups", "--token-file", creds, "--coordinator", d.coordinator, "--cacert", ca); !strings.Contains(out, "demo") && !strings.Contains(out, `"groups"`) {
		t.Errorf("admin groups with the CA printed %q", out)
	}
	d.stop(true)
}
