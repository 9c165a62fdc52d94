package outage

import (
	"os"
	"testing"

	"github.com/capgate/capgate/internal/stack"
)

// TestMain removes the capgate binary the benchmarks built, if any.
func TestMain(m *testing.M) {
	code := m.Run()
	stack.RemoveBuilt()
	os.Exit(code)
}
