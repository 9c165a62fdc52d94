package faults

import (
	"fmt"
	"os"
	"testing"

	"github.com/capgate/capgate/e2e/harness"
)

// binaries are the capgate binary and the harness consumer, built once.
var binaries harness.Binaries

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "capgate-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binaries, err = harness.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needSignals skips a test that kills or stops processes where that is
// not possible.
func needSignals(t *testing.T) {
	t.Helper()
	if ok, why := harness.SignalsSupported(); !ok {
		t.Skip(why)
	}
}
