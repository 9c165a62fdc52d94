package contract_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/api/apicheck"
	"github.com/capgate/capgate/e2e/harness"
)

func startCluster(t *testing.T) (*harness.Cluster, *apicheck.Client) {
	t.Helper()
	c := harness.Start(t, harness.Options{Topic: "demo", Partitions: 12, Gateways: 1})
	cl, err := apicheck.NewClient(c.HTTP(), map[string]string{"coordinator": c.Coordinator.URL, "gateway": c.GatewayURLs()[0]})
	if err != nil {
		t.Fatal(err)
	}
	return c, cl
}

// do sends call, requires the answer to fit the document and to have
// status want, and decodes a 2xx JSON answer into out.
func do(t *testing.T, cl *apicheck.Client, call apicheck.Call, want int, out any) apicheck.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cl.Do(ctx, call)
	if err != nil {
		t.Fatalf("%s: %v", call.Op, err)
	}
	if resp.Status != want {
		t.Fatalf("%s: %d %s, want %d", call.Op, resp.Status, resp.Body, want)
	}
	if out != nil {
		if err := json.Unmarshal(resp.Body, out); err != nil {
			t.Fatalf("%s: %v", call.Op, err)
		}
	}
	return resp
}

// TestWalkthroughFromDocument performs README.md's walk-through with
// requests built from api/openapi.yaml alone (operationIds, path
// templates, schemas), every request and answer validated against it:
// mint a client credential and a produce capability, produce two
// records, join, fetch them, revoke the partition as an operator, see
// the same capability refused with capability_revoked, leave.
func TestWalkthroughFromDocument(t *testing.T) {
	c, cl := startCluster(t)
	admin := c.AdminToken
	var client struct {
		Credential string `json:"client_credential"`
	}
	do(t, cl, apicheck.Call{Op: "admin_clients", Bearer: admin,
		Body: map[string]any{"name": "readme", "groups": []string{"g"}, "topics": []string{"demo"}, "ttl_ms": 600000}}, 200, &client)
	var produceCap api.CapabilityResponse
	do(t, cl, apicheck.Call{Op: "admin_capabilities", Bearer: admin,
		Body: map[string]any{"topic": "demo", "partition": 0, "ops": []string{"produce"}, "ttl_ms": 60000, "holder": "readme"}}, 200, &produceCap)
	p0 := map[string]string{"topic": "demo", "partition": "0"}
	var produced api.ProduceResponse
	do(t, cl, apicheck.Call{Op: "produce_records", Path: p0, Bearer: produceCap.Capability,
		Body: map[string]any{"records": []map[string]string{{"value": b64("hello")}, {"value": b64("world")}}}}, 200, &produced)
	if produced.BaseOffset != 0 || produced.Count != 2 {
		t.Fatalf("produced %+v", produced)
	}

	var joined api.JoinResponse
	do(t, cl, apicheck.Call{Op: "join", Path: map[string]string{"group": "g"}, Bearer: client.Credential,
		Body: map[string]any{"topics": []string{"demo"}, "session_timeout_ms": 60000}}, 200, &joined)
	var fetchCap string
	for _, g := range joined.Grants {
		if g.Topic == "demo" && g.Partition == 0 {
			fetchCap = g.Capability
		}
	}
	if len(joined.Grants) != 12 || fetchCap == "" {
		t.Fatalf("a lone member got %d grants, want all 12 with partition 0", len(joined.Grants))
	}
	fetch := apicheck.Call{Op: "fetch_records", Path: p0, Query: url.Values{"offset": {"0"}}, Bearer: fetchCap}
	var records api.FetchResponse
	do(t, cl, fetch, 200, &records)
	if len(records.Records) != 2 || string(records.Records[0].Value) != "hello" || string(records.Records[1].Value) != "world" {
		t.Fatalf("fetched %+v", records)
	}

	var revoked struct{ Epoch uint64 }
	do(t, cl, apicheck.Call{Op: "admin_partition_revoke", Bearer: admin,
		Path: map[string]string{"group": "g", "topic": "demo", "partition": "0"}, Body: map[string]string{"reason": "walk-through"}}, 200, &revoked)
	if resp := do(t, cl, fetch, 409, nil); resp.Code != api.CodeCapabilityRevoked {
		t.Fatalf("fetch after revoke: %s, want capability_revoked", resp.Code)
	}
	do(t, cl, apicheck.Call{Op: "leave", Path: map[string]string{"group": "g"}, Bearer: joined.MemberToken, Body: map[string]any{}}, 200, nil)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestEveryOperationIsRouted sends every documented operation, without
// credentials, to each process that serves it: the answer must fit the
// document (so it is never the router's own 404 or 405, which no
// operation documents) — a route the document names but the process
// lacks fails here as well as in api/apicheck.
func TestEveryOperationIsRouted(t *testing.T) {
	_, cl := startCluster(t)
	params := map[string]string{"group": "g", "topic": "demo", "partition": "0", "member": "m", "jti": "j", "client_id": "c"}
	for id, op := range cl.Ops {
		for _, server := range op.Servers {
			call := apicheck.Call{Op: id, Server: server, Path: map[string]string{}}
			for _, p := range op.Op.Parameters {
				if p.Value.In == "path" {
					call.Path[p.Value.Name] = params[p.Value.Name]
				}
			}
			if item := cl.Doc.Paths.Find(op.Path); item != nil {
				for _, p := range item.Parameters {
					call.Path[p.Value.Name] = params[p.Value.Name]
				}
			}
			switch id {
			case "sync":
				call.Query = url.Values{"gateway": {"probe"}, "wait_ms": {"0"}}
			case "sync_leave":
				call.Query = url.Values{"gateway": {"probe"}}
			case "fetch_records":
				call.Query = url.Values{"offset": {"0"}}
			}
			if op.Op.RequestBody != nil && op.Op.RequestBody.Value.Required {
				call.Body = minimalBody(id)
			}
			if id == "oauth_token" {
				call.Body, call.ContentType = []byte("grant_type=client_credentials"), "application/x-www-form-urlencoded"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := cl.Do(ctx, call)
			cancel()
			if err != nil {
				t.Errorf("%s on the %s: %v", id, server, err)
				continue
			}
			if resp.Status == http.StatusNotFound && strings.Contains(string(resp.Body), "no such route") {
				t.Errorf("%s on the %s: the router does not know %s %s", id, server, op.Method, op.Path)
			}
		}
	}
}

// minimalBody is a request body that fits the operation's schema.
func minimalBody(op string) any {
	switch op {
	case "join":
		return map[string]any{"topics": []string{"demo"}}
	case "commit":
		return map[string]any{"offsets": []any{}}
	case "admin_group_config":
		return map[string]any{}
	case "admin_partition_lease":
		return map[string]any{"holder": "h", "ttl_ms": 1000}
	case "admin_partition_offset":
		return map[string]any{"offset": 0}
	case "admin_capabilities":
		return map[string]any{"topic": "demo", "partition": 0, "ttl_ms": 1000, "holder": "h"}
	case "admin_qos":
		return map[string]any{"selector": map[string]string{"group": "g"}, "ttl_ms": 1000}
	case "admin_clients":
		return map[string]any{"name": "n", "groups": []string{"g"}}
	case "admin_oauth_client_create":
		return map[string]any{"name": "n", "groups": []string{"g"}, "topics": []string{"demo"}}
	case "produce_records", "produce_topic_records":
		return map[string]any{"records": []map[string]string{{"value": b64("x")}}}
	}
	return map[string]any{}
}

// TestOAuthClientLibrary: a standard OAuth2 client library nobody here
// wrote (golang.org/x/oauth2/clientcredentials), pointed at POST
// /oauth/token with a client registered through the document's admin
// operation, obtains a credential — with Basic and with form
// authentication — and joins a group with it.
func TestOAuthClientLibrary(t *testing.T) {
	c, cl := startCluster(t)
	var created struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	do(t, cl, apicheck.Call{Op: "admin_oauth_client_create", Bearer: c.AdminToken,
		Body: map[string]any{"name": "library", "groups": []string{"lib-*"}, "topics": []string{"demo"}}}, 200, &created)
	for _, style := range []oauth2.AuthStyle{oauth2.AuthStyleInHeader, oauth2.AuthStyleInParams} {
		cfg := clientcredentials.Config{ClientID: created.ClientID, ClientSecret: created.ClientSecret,
			TokenURL: c.Coordinator.URL + "/oauth/token", AuthStyle: style, Scopes: []string{"group:lib-a"}}
		ctx := context.WithValue(context.Background(), oauth2.HTTPClient, c.HTTP())
		tok, err := cfg.Token(ctx)
		if err != nil {
			t.Fatalf("auth style %d: %v", style, err)
		}
		if tok.TokenType != "Bearer" || tok.Expiry.IsZero() {
			t.Fatalf("token %+v", tok)
		}
		var joined api.JoinResponse
		do(t, cl, apicheck.Call{Op: "join", Path: map[string]string{"group": "lib-a"}, Bearer: tok.AccessToken,
			Body: map[string]any{"topics": []string{"demo"}}}, 200, &joined)
		do(t, cl, apicheck.Call{Op: "leave", Path: map[string]string{"group": "lib-a"}, Bearer: joined.MemberToken, Body: map[string]any{}}, 200, nil)
	}
	bad := clientcredentials.Config{ClientID: created.ClientID, ClientSecret: "wrong", TokenURL: c.Coordinator.URL + "/oauth/token"}
	_, err := bad.Token(context.WithValue(context.Background(), oauth2.HTTPClient, c.HTTP()))
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != "invalid_client" {
		t.Fatalf("wrong secret through the library: %v, want invalid_client", err)
	}
}
