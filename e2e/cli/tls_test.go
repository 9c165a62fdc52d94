package cli_test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
var tlsQuickstartChecks = []step{
	{"load credentials", nil},
	{"produce and consume over TLS", []string{`produced 1 records? to demo/1`, `demo/1\t0\t\tsecure`}},
	{"curl with the CA", []string{`"status":"ready"`, `HTTP 200`}},
	{"curl without the CA", []string{`refused: certificate not trusted`}},
	{"plaintext to the TLS port", []string{`"this port speaks TLS: use https://"`, `HTTP 400`}},
}

// TestTLSQuickstart runs README.md's TLS quickstart (its ```sh tls
// blocks) against `capgate dev --tls`: the CLI and curl work with the CA
// from credentials.env, curl without it is refused, plaintext is
// answered 400 "use https://", and the dev PKI's keys are private (0600).
func TestTLSQuickstart(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is not installed (apt-get install curl; .ci/run does)")
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
	checkSteps(t, runBlocks(t, work, "TLS quickstart", blocks), tlsQuickstartChecks)
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
