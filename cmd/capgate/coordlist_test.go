package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/capgate/capgate/internal/coordinators/coordinatorstest"
)

// TestAdminSkipsAnUnreachableReplica: with the first listed replica
// down (connection refused), one invocation of each admin command — a
// GET and POSTs — is answered by the next one; with none reachable, the
// error names every URL tried.
func TestAdminSkipsAnUnreachableReplica(t *testing.T) {
	base, admin := startCoordinator(t)
	dead := coordinatorstest.Down(t)
	flags := []string{"--coordinator", dead + "," + base, "--token", admin, "-o", "json"}
	adminRun := func(args ...string) string {
		t.Helper()
		out, err := run(t, append(append([]string{"admin"}, args...), flags...)...)
		if err != nil {
			t.Fatalf("admin %s with %s down: %v\n%s", strings.Join(args, " "), dead, err, out)
		}
		return out
	}
	adminRun("groups")
	var grant struct{ JTI string }
	if err := json.Unmarshal([]byte(adminRun("grant", "--topic", "orders", "--partition", "1", "--holder", "auditor", "--ops", "fetch", "--ttl", "2m")), &grant); err != nil || grant.JTI == "" {
		t.Fatalf("grant: %v %+v", err, grant)
	}
	// The jti after "--" and the flags: a jti may start with '-'.
	out, err := run(t, append(append([]string{"admin", "revoke-capability"}, flags...), "--", grant.JTI)...)
	if err != nil || !strings.Contains(out, grant.JTI) {
		t.Fatalf("revoke-capability with %s down: %v\n%s", dead, err, out)
	}
	if out := adminRun("audit", "--limit", "1"); !strings.Contains(out, grant.JTI) || !strings.Contains(out, `"ok"`) {
		t.Fatalf("the revoke is not the last audit record: %s", out)
	}

	dead2 := coordinatorstest.Down(t)
	_, err = run(t, "admin", "groups", "--coordinator", dead+","+dead2, "--token", admin)
	if err == nil {
		t.Fatal("admin groups with no replica reachable succeeded")
	}
	for _, want := range []string{dead + ": ", dead2 + ": ", "connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}
