package cli_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/stack"
)

// TestProduceWithAClientCredential: `capgate produce` writes with a
// client credential whose ops include produce (--credential,
// --credential-file or CAPGATE_CREDENTIAL) against a real `capgate dev`,
// with no admin token anywhere (newuser3 #3: produce took only a
// capability or the admin token, and the gateway refused a credential
// "join a group with it"). A consume-only credential is refused 403
// saying so, and a credential without --partition is a usage error.
func TestProduceWithAClientCredential(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	var writer, reader struct {
		Credential string `json:"client_credential"`
	}
	d.adminJSON(t, &writer, "client-credential", "--name", "writer", "--groups", "*", "--topics", "demo", "--ops", "consume,produce")
	d.adminJSON(t, &reader, "client-credential", "--name", "reader", "--groups", "*", "--topics", "demo")
	endpoints := []string{"--coordinator", d.coordinator, "--gateways", d.gateway}
	produce := func(stdin string, env []string, args ...string) (string, string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, capgate, append(append([]string{"produce", "--topic", "demo"}, args...), endpoints...)...)
		cmd.Stdin, cmd.Env = strings.NewReader(stdin), append(stack.CleanEnv(), env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}

	_, stderr, err := produce("a\nb\n", nil, "--credential", writer.Credential, "--partition", "1")
	if err != nil || !strings.Contains(stderr, "produced 2 records to demo/1") {
		t.Fatalf("produce --credential: %v\n%s", err, stderr)
	}
	file := filepath.Join(t.TempDir(), "writer.cred")
	writeFile(t, file, writer.Credential+"\n")
	if _, stderr, err = produce("c\n", nil, "--credential-file", file, "--partition", "2"); err != nil || !strings.Contains(stderr, "produced 1 record to demo/2") {
		t.Fatalf("produce --credential-file: %v\n%s", err, stderr)
	}
	if _, stderr, err = produce("d\n", []string{"CAPGATE_CREDENTIAL=" + writer.Credential}, "--partition", "2"); err != nil || !strings.Contains(stderr, "produced 1 record to demo/2") {
		t.Fatalf("produce with CAPGATE_CREDENTIAL: %v\n%s", err, stderr)
	}

	_, stderr, err = produce("x\n", nil, "--credential", reader.Credential, "--partition", "1")
	if err == nil || !strings.Contains(stderr, "forbidden (403)") || !strings.Contains(stderr, "does not allow produce") {
		t.Errorf("produce with a consume-only credential: %v\n%s", err, stderr)
	}
	_, stderr, err = produce("x\n", nil, "--credential", writer.Credential)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr, "pass --partition") {
		t.Errorf("produce with a credential and no --partition: %v, want exit 2 saying to pass --partition\n%s", err, stderr)
	}

	out := run(t, 60*time.Second, "", d.consumeArgs("check", "--max-records", "4", "--idle-exit", "20s")...)
	got := values(parseConsumed(t, out))
	slices.Sort(got)
	if strings.Join(got, ",") != "a,b,c,d" {
		t.Fatalf("consumed %q, want a, b, c and d (and nothing of the refused produces)", got)
	}
}
