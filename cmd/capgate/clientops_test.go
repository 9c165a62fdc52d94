package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestClientCredentialOpsFlag: `admin client-credential` mints consume
// only without --ops and carries --ops consume,produce to the admin API
// (the credential's op claim says both); an op that is not a client
// credential's fails with the coordinator's 400 naming it. `admin
// oauth-client create --ops` registers the client with them.
func TestClientCredentialOpsFlag(t *testing.T) {
	base, admin := startCoordinator(t)
	flags := []string{"--coordinator", base, "--token", admin, "--output", "json"}
	mint := func(args ...string) (map[string]any, string, error) {
		t.Helper()
		out, err := run(t, append(append([]string{"admin"}, args...), flags...)...)
		var v map[string]any
		if err == nil {
			if jerr := json.Unmarshal([]byte(out), &v); jerr != nil {
				t.Fatalf("admin %s printed %q", strings.Join(args, " "), out)
			}
		}
		return v, out, err
	}
	opClaim := func(v map[string]any) any {
		t.Helper()
		parts := strings.Split(fmt.Sprint(v["client_credential"]), ".")
		if len(parts) != 3 {
			t.Fatalf("no credential in %v", v)
		}
		payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
		var claims map[string]any
		if err := json.Unmarshal(payload, &claims); err != nil {
			t.Fatal(err)
		}
		return claims["op"]
	}

	ro, out, err := mint("client-credential", "--name", "reader", "--groups", "g", "--topics", "orders")
	if err != nil || fmt.Sprint(ro["ops"]) != "[consume]" || opClaim(ro) != nil {
		t.Fatalf("without --ops: %v %s; want ops [consume], no op claim", err, out)
	}
	rw, out, err := mint("client-credential", "--name", "writer", "--groups", "g", "--topics", "orders", "--ops", "consume,produce")
	if err != nil || fmt.Sprint(rw["ops"]) != "[consume produce]" || fmt.Sprint(opClaim(rw)) != "[consume produce]" {
		t.Fatalf("--ops consume,produce: %v %s", err, out)
	}
	if _, out, err := mint("client-credential", "--name", "bad", "--groups", "g", "--topics", "orders", "--ops", "consume,fetch"); err == nil || !strings.Contains(out+err.Error(), `"fetch"`) {
		t.Fatalf("--ops consume,fetch: %v %s; want refused naming fetch", err, out)
	}
	oc, out, err := mint("oauth-client", "create", "--name", "ingest", "--groups", "g", "--topics", "orders", "--ops", "consume,produce")
	if err != nil || fmt.Sprint(oc["ops"]) != "[consume produce]" {
		t.Fatalf("oauth-client create --ops consume,produce: %v %s", err, out)
	}
}
