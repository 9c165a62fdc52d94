package cli_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/stack"
)

// TestCoordinatorRefusesAKEKOthersCanRead runs `capgate coordinator`
// (state: kafka, a replica) with a KEK file of mode 0644: it exits 1 at
// once, naming the file, its mode and `chmod 600` — as README says and as
// a TLS key of that mode is refused (newuser2 #4). It used to start,
// answer /healthz 200 and /readyz 503 without the reason, and log a WARN
// every lease_timeout forever. After `chmod 600` the same config starts.
func TestCoordinatorRefusesAKEKOthersCanRead(t *testing.T) {
	dir := t.TempDir()
	kek := filepath.Join(dir, "kek.key")
	run(t, 20*time.Second, "", "keys", "kek", "--out", kek)
	if err := os.Chmod(kek, 0o644); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "capgate.yaml")
	// No Kafka at the seed: the KEK is checked before the log is read.
	yaml := "coordinator:\n  listen: 127.0.0.1:0\n  state: kafka\n  kafka_state:\n    kek_file: " + kek +
		"\n  replica:\n    id: c1\n  broker:\n    seeds: [127.0.0.1:1]\n"
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	exited, stderr := startCoordinatorUntilServing(t, config)
	if !exited {
		t.Fatalf("the coordinator started with a KEK of mode 0644:\n%s", stderr)
	}
	for _, want := range []string{kek, "-rw-r--r--", "want 0600", "chmod 600 " + kek} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if err := os.Chmod(kek, 0o600); err != nil {
		t.Fatal(err)
	}
	if exited, stderr := startCoordinatorUntilServing(t, config); exited {
		t.Fatalf("the coordinator did not start with a KEK of mode 0600:\n%s", stderr)
	}
}

// startCoordinatorUntilServing runs `capgate coordinator --config config`
// until it logs "coordinator replica serving" (then stops it: exited
// false) or exits (exited true: it must have exited 1), and returns its
// stderr.
func startCoordinatorUntilServing(t *testing.T, config string) (exited bool, stderr string) {
	t.Helper()
	serving := make(chan struct{}, 1)
	var out syncBuffer
	p, err := stack.StartProcess("coordinator", capgate, []string{"coordinator", "--config", config}, stack.CleanEnv(), nil, func(line []byte) {
		out.Write(append(line, '\n'))
		if bytes.Contains(line, []byte("coordinator replica serving")) {
			select {
			case serving <- struct{}{}:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-serving:
		if err := p.Terminate(10 * time.Second); err != nil {
			t.Logf("stop: %v", err) // how it stops is not this test's
		}
		return false, out.String()
	case <-p.Done():
		var exit *exec.ExitError
		if err := p.Wait(time.Second); !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Errorf("exit: %v, want status 1", err)
		}
		return true, out.String()
	case <-time.After(30 * time.Second):
		p.Kill()
		t.Fatalf("neither serving nor exited after 30 s:\n%s", out.String())
	}
	return false, ""
}
