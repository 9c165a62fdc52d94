package contract_test

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/api/apicheck"
	"github.com/capgate/capgate/e2e/harness"
)

// TestMalformedRequestsFitTheDocument sends every documented operation
// what an attacker or a careless client sends — bodies that are not
// JSON, of the wrong shape, with unknown fields or huge numbers, bodies
// and headers over the limits, no bearer, a forged one, each kind of
// token where another is wanted — and holds every answer to the
// document: a documented status (413 and 431 listed by the operation
// itself), a documented error code, a body of the documented schema, no
// 2xx without a real bearer where one is required.
func TestMalformedRequestsFitTheDocument(t *testing.T) {
	c, cl := startCluster(t)
	tok := tokensFor(t, c, cl)
	params := map[string]string{"group": "g", "topic": "demo", "partition": "0", "member": "m", "jti": "AAAAAAAAAAAAAAAAAAAAAA", "client_id": "c"}
	bodies := map[string][]byte{
		"not json":      []byte("{"),
		"array":         []byte("[]"),
		"null":          []byte("null"),
		"string":        []byte(`"x"`),
		"trailing":      []byte(`{} {}`),
		"unknown field": []byte(`{"zzz_unknown":1}`),
		"wrong types":   []byte(`{"topics":"demo","topic":7,"partition":"0","ttl_ms":"1","offsets":{},"holder":[],"selector":1,"ops":"fetch","name":{},"groups":"g","offset":"x","to":5,"wait_ms":"1","reason":3}`),
		"huge numbers":  []byte(`{"topics":["demo"],"session_timeout_ms":9223372036854775807,"partition":2147483647,"ttl_ms":9223372036854775807,"offset":9223372036854775807,"wait_ms":9223372036854775807,"max_bytes_per_sec":9223372036854775807,"max_moves_per_second":9223372036854775807,"handoff_timeout_ms":9223372036854775807,"holder":"h","topic":"demo","selector":{"group":"g"},"name":"n","groups":["g"]}`),
		"negative":      []byte(`{"topics":["demo"],"session_timeout_ms":-1,"partition":-1,"ttl_ms":-1,"offset":-5,"wait_ms":-1,"max_bytes_per_sec":-1,"max_moves_per_second":-1,"handoff_timeout_ms":-1,"holder":"h","topic":"demo","selector":{"group":"g"},"name":"n","groups":["g"]}`),
		"too large":     []byte(`{"topics":["` + strings.Repeat("a", 2<<20) + `"]}`),
		"deep":          []byte(strings.Repeat("[", 10000) + strings.Repeat("]", 10000)),
	}
	bearers := map[string]string{"none": "", "forged": "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", "garbage": "x"}
	maps.Copy(bearers, tok)
	sent := 0
	defer func() { t.Logf("%d requests", sent) }()
	for _, id := range slices.Sorted(maps.Keys(cl.Ops)) {
		op := cl.Ops[id]
		if id == "oauth_token" || id == "metrics" || id == "openapi" {
			continue
		}
		for _, server := range op.Servers {
			path := map[string]string{}
			for _, p := range op.Op.Parameters {
				if p.Value.In == "path" {
					path[p.Value.Name] = params[p.Value.Name]
				}
			}
			if item := cl.Doc.Paths.Find(op.Path); item != nil {
				for _, p := range item.Parameters {
					path[p.Value.Name] = params[p.Value.Name]
				}
			}
			query := url.Values{}
			switch id {
			case "sync", "sync_leave":
				query.Set("gateway", "probe")
				query.Set("wait_ms", "0")
			case "fetch_records":
				query.Set("offset", "0")
			}
			send := func(what, bearerName string, body []byte, ct string) {
				call := apicheck.Call{Op: id, Server: server, Path: path, Query: query, Bearer: bearers[bearerName],
					Body: body, ContentType: ct, Unchecked: true}
				if what == "huge header" {
					call.Header = http.Header{"X-Padding": {strings.Repeat("p", 64<<10)}}
				}
				if body == nil {
					call.Body = nil
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				resp, err := cl.Do(ctx, call)
				sent++
				if err != nil {
					t.Errorf("%s on the %s, %s with %s: %v", id, server, what, bearerName, err)
					return
				}
				if _, listed := op.Codes[resp.Status]; !listed && (resp.Status == 413 || resp.Status == 431) {
					t.Errorf("%s on the %s, %s: %d, which the operation itself does not list", id, server, what, resp.Status)
				}
				if resp.Status < 300 && op.Op.Security != nil && len(*op.Op.Security) > 0 && (bearerName == "none" || bearerName == "forged" || bearerName == "garbage") {
					t.Errorf("%s on the %s, %s with %s: %d %.200s", id, server, what, bearerName, resp.Status, resp.Body)
				}
			}
			send("huge header", "admin", nil, "")
			for _, b := range slices.Sorted(maps.Keys(bearers)) {
				if op.Op.RequestBody == nil {
					send("no body", b, nil, "")
					continue
				}
				for _, name := range slices.Sorted(maps.Keys(bodies)) {
					send(name, b, bodies[name], "")
				}
				send("text/plain", b, []byte(`{}`), "text/plain")
			}
		}
	}
}

// tokensFor mints one token of each kind: admin and sync secrets, a
// client credential, and a member token and a capability from a join of
// group g.
func tokensFor(t *testing.T, c *harness.Cluster, cl *apicheck.Client) map[string]string {
	t.Helper()
	cred := c.ClientCredential(t, "g")
	var joined api.JoinResponse
	do(t, cl, apicheck.Call{Op: "join", Path: map[string]string{"group": "g"}, Bearer: cred,
		Body: map[string]any{"topics": []string{"demo"}, "session_timeout_ms": 60000}}, 200, &joined)
	return map[string]string{"admin": c.AdminToken, "sync": c.SyncToken, "credential": cred,
		"member": joined.MemberToken, "capability": joined.Grants[0].Capability}
}
