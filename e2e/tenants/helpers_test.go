package tenants_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/e2e/sdk"
)

// client is one tenant speaking raw HTTP to the cluster.
type client struct {
	c *sdk.Cluster
}

// request sends method path with bearer and a JSON body (nil: none) to
// base and returns the status and body.
func (cl client) request(t testing.TB, method, url, bearer string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := cl.c.HTTP().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, url, err)
	}
	return resp.StatusCode, out
}

// coordinator sends a request to the coordinator.
func (cl client) coordinator(t testing.TB, method, path, bearer string, body any) (int, []byte) {
	t.Helper()
	return cl.request(t, method, cl.c.CoordinatorURL+path, bearer, body)
}

// credential mints a client credential for groups through the admin API
// and returns it with its jti.
func (cl client) credential(t testing.TB, name string, groups ...string) (token, jti string) {
	t.Helper()
	var out coordinator.ClientResponse
	status, raw := cl.c.Admin(t, http.MethodPost, "/v1/admin/clients",
		coordinator.ClientRequest{Name: name, Groups: groups, Topics: []string{"*"}, TTLMs: 3600_000}, &out)
	if status != http.StatusOK {
		t.Fatalf("mint credential %s: %d %s", name, status, raw)
	}
	return out.Credential, out.JTI
}

// member is what a tenant holds after joining: its token and every
// capability it was ever handed, by partition.
type member struct {
	name   string
	group  string
	id     string
	token  string
	grants map[int32][]api.Grant // every grant received, oldest first
	revoke map[int32]bool        // partitions a heartbeat revoked since
}

func (m *member) take(grants ...[]api.Grant) {
	for _, gs := range grants {
		for _, g := range gs {
			m.grants[g.Partition] = append(m.grants[g.Partition], g)
		}
	}
}

// join posts a join and returns the status, the error code (or "") and
// the member on success.
func (cl client) join(t testing.TB, name, group, bearer string, req api.JoinRequest) (int, api.Code, *member) {
	t.Helper()
	status, raw := cl.coordinator(t, http.MethodPost, "/v1/groups/"+group+"/join", bearer, req)
	if status != http.StatusOK {
		return status, codeOf(raw), nil
	}
	var resp api.JoinResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatalf("join %s: %v: %s", name, err, raw)
	}
	m := &member{name: name, group: group, id: resp.MemberID, token: resp.MemberToken,
		grants: map[int32][]api.Grant{}, revoke: map[int32]bool{}}
	m.take(resp.Grants)
	return status, "", m
}

// heartbeat sends one short heartbeat for m and takes what it carries.
func (cl client) heartbeat(t testing.TB, m *member) (int, api.Code) {
	t.Helper()
	status, raw := cl.coordinator(t, http.MethodPost, "/v1/groups/"+m.group+"/heartbeat", m.token, api.HeartbeatRequest{WaitMs: 50})
	if status != http.StatusOK {
		return status, codeOf(raw)
	}
	var resp api.HeartbeatResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatalf("heartbeat %s: %v", m.name, err)
	}
	for _, r := range resp.Revoke {
		m.revoke[r.Partition] = true
	}
	for _, g := range resp.Grants {
		delete(m.revoke, g.Partition)
	}
	m.take(resp.Grants, resp.Renew)
	return status, ""
}

// fetch reads partition p at offset 0 through the gateway at url.
func (cl client) fetch(t testing.TB, url, capability string, p int32) (int, api.Code) {
	t.Helper()
	status, raw := cl.request(t, http.MethodGet, fmt.Sprintf("%s/v1/topics/%s/partitions/%d/records?offset=0&max_wait_ms=0", url, cl.c.Topic, p), capability, nil)
	if status != http.StatusOK {
		return status, codeOf(raw)
	}
	return status, ""
}

func codeOf(raw []byte) api.Code {
	var body api.ErrorBody
	if json.Unmarshal(raw, &body) != nil {
		return api.Code("not a JSON error: " + strings.TrimSpace(string(raw)))
	}
	return body.Error.Code
}

// subOf is the sub claim of a token (decoded, not verified): what anyone
// a capability is handed to can read.
func subOf(token string) string { return harness.ClaimsOf(token).Subject }

func jsonInto(raw []byte, v any) error { return json.Unmarshal(raw, v) }

// soloMember starts a cluster with a topic of the given partitions and
// joins one member of group g with a fresh credential.
func soloMember(t *testing.T, partitions int32) (*sdk.Cluster, client, *member) {
	t.Helper()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: partitions})
	cl := client{c}
	cred, _ := cl.credential(t, "svc", "g")
	_, code, m := cl.join(t, "m", "g", cred, api.JoinRequest{Topics: []string{c.Topic}, SessionTimeoutMs: 60_000})
	if m == nil {
		t.Fatalf("join refused: %s", code)
	}
	return c, cl, m
}

// sdkEventually waits for cond (polling a real server) up to 30 s.
func sdkEventually(t *testing.T, cond func() bool) {
	t.Helper()
	sdk.Eventually(t, 30*time.Second, "condition", func() (bool, string) { return cond(), "" })
}
