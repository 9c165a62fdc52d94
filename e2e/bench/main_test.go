package bench

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the binaries the deployment benchmark built, if it
// built any.
func TestMain(m *testing.M) {
	code := m.Run()
	if binaries.capgate != "" {
		_ = os.RemoveAll(filepath.Dir(binaries.capgate))
	}
	os.Exit(code)
}
