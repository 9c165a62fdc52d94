package ha

import (
	"fmt"
	"os"
	"testing"

	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/internal/stack"
)

// binaries are the programs the suite runs (built once, TestMain).
var binaries harness.Binaries

func TestMain(m *testing.M) {
	code := func() int {
		bin, err := stack.BuildOnce("./cmd/capgate")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		binaries.Capgate = bin
		return m.Run()
	}()
	stack.RemoveBuilt()
	os.Exit(code)
}
