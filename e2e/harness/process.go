package harness

import (
	"testing"

	"github.com/capgate/capgate/internal/stack"
)

// Binaries are the programs a test runs as processes (the capgate binary
// and this harness's consumer program).
type Binaries = stack.Binaries

// Process is a program the test runs (see stack.Process).
type Process = stack.Process

// Build compiles the capgate binary and the harness consumer into dir
// (once per test binary: TestMain).
func Build(dir string) (Binaries, error) { return stack.Build(dir, true) }

// SignalsSupported reports whether the harness can kill, stop and
// continue processes here, and why not.
func SignalsSupported() (bool, string) { return stack.SignalsSupported() }

// StartProcess starts bin with args and env, failing t when it cannot;
// onStdout and onStderr (may be nil) receive each line. The caller stops
// it (a part restarted late in a test must not be killed before the
// parts that depend on it, as a cleanup of its own would).
func StartProcess(t testing.TB, name, bin string, args, env []string, onStdout, onStderr func([]byte)) *Process {
	t.Helper()
	p, err := stack.StartProcess(name, bin, args, env, onStdout, onStderr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
