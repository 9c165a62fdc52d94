package cli_test

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGatewayBadConfigNamesTheSetting runs `capgate gateway --config
// bad.yaml` as an operator would: it exits 1 and stderr names each bad
// setting by path and line with what it wants, and no Go type name.
func TestGatewayBadConfigNamesTheSetting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	writeFile(t, path, "gateway:\n  id: g\n  sync_timout: 5s\n  max_wait: 30\n")
	_, stderr, err := cliResult(t, "gateway", "--config", path)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("err = %v, want exit 1; stderr:\n%s", err, stderr)
	}
	for _, want := range []string{
		"gateway.sync_timout (line 3): unknown setting; did you mean sync_timeout?",
		"gateway.max_wait (line 4): 30 is not a duration: write it with a unit, e.g. 30s",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	for _, leak := range []string{"gateway.Config", "time.Duration", "!!int", "unmarshal"} {
		if strings.Contains(stderr, leak) {
			t.Errorf("stderr leaks %q:\n%s", leak, stderr)
		}
	}
}
