package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAdminCommandsAgainstACoordinator drives the admin subcommands
// against a real coordinator and checks what each answered.
func TestAdminCommandsAgainstACoordinator(t *testing.T) {
	base, admin := startCoordinator(t)
	flags := []string{"--coordinator", base, "--token", admin}
	adminRun := func(args ...string) map[string]any {
		t.Helper()
		out, err := run(t, append(append([]string{"admin"}, args...), flags...)...)
		if err != nil {
			t.Fatalf("admin %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		var v map[string]any
		if strings.TrimSpace(out) != "ok" {
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Fatalf("admin %s printed %q", strings.Join(args, " "), out)
			}
		}
		return v
	}
	cred := adminRun("client-credential", "--name", "svc", "--groups", "billing", "--topics", "orders")
	if c, _ := cred["client_credential"].(string); strings.Count(c, ".") != 2 {
		t.Fatalf("client-credential = %v", cred)
	}
	grant := adminRun("grant", "--topic", "orders", "--partition", "1", "--holder", "auditor", "--ops", "fetch", "--ttl", "2m", "--offset-from", "5", "--offset-to", "9")
	jti, _ := grant["jti"].(string)
	if len(jti) != 22 {
		t.Fatalf("grant = %v", grant)
	}
	// The jti after "--" (and after the flags): a jti is base64url and
	// starts with '-' one time in 64.
	out, err := run(t, append(append([]string{"admin", "revoke-capability"}, flags...), "--", jti)...)
	var revoked map[string]any
	if err != nil || json.Unmarshal([]byte(out), &revoked) != nil || revoked["jti"] != jti {
		t.Fatalf("revoke-capability: %v %s", err, out)
	}
	adminRun("qos", "--group", "billing", "--log-level", "debug", "--ttl", "1m")
	adminRun("config", "billing", "--max-moves-per-second", "2", "--handoff-timeout", "5s")
	groups := adminRun("groups")
	if b, _ := json.Marshal(groups); !strings.Contains(string(b), "billing") {
		t.Fatalf("groups = %s", b)
	}
	if g := adminRun("group", "billing"); g == nil {
		t.Fatal("group describe printed nothing")
	}
	adminRun("gateways")
	// Tables on request (a terminal gets them by default), JSON otherwise.
	for args, want := range map[string][]string{
		"groups":          {"GROUP", "billing"},
		"group billing":   {"GROUP", "billing", "ASSIGNOR", "TOTAL-LAG", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LAG"},
		"qos list":        {"ID", "SELECTOR", "group=billing", "debug"},
		"audit --limit 3": {"SEQ", "WHO", "ACTION", "group_config", "ok"},
	} {
		out, err := run(t, append(append(append([]string{"admin"}, strings.Fields(args)...), flags...), "-o", "table")...)
		if err != nil {
			t.Fatalf("admin %s -o table: %v", args, err)
		}
		for _, w := range want {
			if !strings.Contains(out, w) || strings.HasPrefix(strings.TrimSpace(out), "{") {
				t.Fatalf("admin %s -o table printed %q, want a table with %q", args, out, w)
			}
		}
	}
	// Errors carry the API's code.
	_, err = run(t, append([]string{"admin", "revoke", "billing", "orders", "abc"}, flags...)...)
	if err == nil || !strings.Contains(err.Error(), "partition") {
		t.Fatalf("revoke of partition abc: %v", err)
	}
	_, err = run(t, "admin", "groups", "--coordinator", base, "--token", "wrong")
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "admin token refused") {
		t.Fatalf("wrong admin token: %v", err)
	}
	// A base URL with a path (or a gateway's) answered only "GET
	// /v1/admin/groups: 404 not_found: no such route", naming a path it
	// had not requested.
	_, err = run(t, "admin", "groups", "--coordinator", base+"/v1", "--token", admin)
	if err == nil || !strings.Contains(err.Error(), base+"/v1/v1/admin/groups") || !strings.Contains(err.Error(), "a capgate coordinator?") {
		t.Fatalf("--coordinator with a path: %v", err)
	}
}
