package client

import (
	"context"
	"errors"
	"testing"

	"github.com/capgate/capgate/api"
)

// TestCloseInAHookKeepsItsContext: Close given a context that had ended
// before the call closes anyway, within request_timeout (e2e/sdk
// TestCloseWithAnEndedContextStillCommits) — but not when that context is
// a hook's: Close from a hook cannot finish (it waits for the hook), so
// the hook's ended context is honoured at once, as before, instead of
// holding the hook for request_timeout.
func TestCloseInAHookKeepsItsContext(t *testing.T) {
	var e *env
	e = newEnv(t, func(int) []api.Grant { return []api.Grant{e.grantOf(p0, 1, 0, "cap-p0")} })
	closed := make(chan error, 1)
	var c *Consumer
	// Without OnLost, a lost partition's OnRevoke gets a cancelled ctx.
	c = e.start(e.config(), OnRevoke(func(ctx context.Context, _ []Partition) { closed <- c.Close(ctx) }))
	recv(t, e.coord.joined, "join")
	e.coord.failures <- api.CodeUnknownMember
	if err := recv(t, closed, "Close in the hook"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close with the hook's cancelled ctx: %v, want context.Canceled at once", err)
	}
}
