package main

import (
	"strings"
	"testing"

	"github.com/capgate/capgate/internal/coordinators/coordinatorstest"
)

// TestAdminFollowsNotLeader: `--coordinator standby,leader` — the standby
// answers 421 not_leader naming the real coordinator; the command is
// answered by it, and the standby is asked once per process.
func TestAdminFollowsNotLeader(t *testing.T) {
	base, admin := startCoordinator(t)
	standby, asked := coordinatorstest.Standby(t, base, true)
	out, err := run(t, "admin", "client-credential", "--name", "svc", "--groups", "billing", "--topics", "orders",
		"--coordinator", standby.URL+","+base, "--token", admin)
	if err != nil || !strings.Contains(out, `"client_credential"`) {
		t.Fatalf("through the standby: %v\n%s", err, out)
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("standby asked %d times, want once", n)
	}
	if _, err := run(t, "admin", "groups", "--coordinator", " , ", "--token", admin); err == nil {
		t.Fatal("an empty --coordinator list was accepted")
	}
}
