package cli_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/stack"
	"github.com/capgate/capgate/tlsconf"
)

// caClient is an HTTP client trusting only the CA in caFile.
func caClient(t *testing.T, caFile string) *http.Client {
	t.Helper()
	tc, err := tlsconf.ClientConfig{CAFile: caFile}.TLS(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
}

// tlsQuickstartChecks is what each ```sh tls block of README.md must
// print, in order.
var tlsQuickstartChecks = []struct {
	step string
	want []string
}{
	{"load credentials", nil},
	{"produce and consume over TLS", []string{`produced 1 records? to demo/1`, `demo/1\t0\t\tsecure`}},
	{"curl with the CA", []string{`"status":"ready"`, `HTTP 200`}},
	{"curl without the CA", []string{`refused: certificate not trusted`}},
	{"plaintext to the TLS port", []string{`refused: not TLS`}},
}

// TestTLSQuickstart runs README.md's TLS quickstart (its ```sh tls
// blocks) against `capgate dev --tls`: the CLI and curl work with the CA
// from credentials.env, curl without it and plaintext are refused, and
// the dev PKI's keys are private (0600).
func TestTLSQuickstart(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	blocks := taggedBlocks(t, "../../README.md", "sh tls")
	if len(blocks) != len(tlsQuickstartChecks) {
		t.Fatalf("README.md has %d ```sh tls blocks, the test checks %d: update tlsQuickstartChecks", len(blocks), len(tlsQuickstartChecks))
	}
	work := t.TempDir()
	d := startDev(t, filepath.Join(work, "capgate-data"), "--tls")
	if !strings.HasPrefix(d.coordinator, "https://") || !strings.HasPrefix(d.gateway, "https://") {
		t.Fatalf("capgate dev --tls serves %s and %s", d.coordinator, d.gateway)
	}
	keys, _ := filepath.Glob(filepath.Join(work, "capgate-data", "tls", "*.key"))
	if len(keys) < 3 {
		t.Fatalf("dev PKI keys: %v", keys)
	}
	for _, k := range keys {
		if info, err := os.Stat(k); err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v %v, want 0600", k, info.Mode().Perm(), err)
		}
	}
	var script strings.Builder
	for i, b := range blocks {
		fmt.Fprintf(&script, "echo '@@step %d'\n%s\n", i, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", "exec 2>&1\n"+script.String())
	cmd.Dir = work
	cmd.Env = append(stack.CleanEnv(), "PATH="+filepath.Dir(capgate)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("TLS quickstart script: %v\n%s", err, out)
	}
	steps := regexp.MustCompile(`(?m)^@@step \d+\n`).Split(string(out), -1)[1:]
	for i, check := range tlsQuickstartChecks {
		for _, want := range check.want {
			if !regexp.MustCompile(want).MatchString(steps[i]) {
				t.Errorf("step %d (%s): output does not match %q:\n%s", i, check.step, want, steps[i])
			}
		}
	}
}

// taggedBlocks returns the ```<tag> blocks of a markdown file, in order
// (```sh tls renders as sh; TestWalkthrough takes only plain ```sh).
func taggedBlocks(t *testing.T, path, tag string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks, cur []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```"+tag:
			in, cur = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}
