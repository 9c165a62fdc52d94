package bench

import (
	"os"
	"testing"

	"github.com/capgate/capgate/internal/stack"
)

// TestMain removes the binaries the deployment benchmark built, if it
// built any.
func TestMain(m *testing.M) {
	code := m.Run()
	stack.RemoveBuilt()
	os.Exit(code)
}
