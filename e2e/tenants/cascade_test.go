package tenants_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestRevokedCredentialEndsItsMembers is defect 3 of issue #10: after
// POST /v1/admin/capabilities/{jti}/revoke on a client credential, new
// joins were refused but the member it opened kept heartbeating, its
// capabilities (and their attenuated children) kept reading, and its
// member token stayed valid for a day. Now the revocation ends what the
// credential opened: heartbeat, commit and gateway fetch of its member
// are refused, its partitions are fenced and go to the other member, and
// the group view named the credential behind each member beforehand.
func TestRevokedCredentialEndsItsMembers(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 4})
	cl := client{c}
	leakedCred, leakedJTI := cl.credential(t, "leaked", "g")
	otherCred, otherJTI := cl.credential(t, "other", "g")
	_, _, bad := cl.join(t, "leaked", "g", leakedCred, api.JoinRequest{Topics: []string{c.Topic}, SessionTimeoutMs: 30_000})
	if bad == nil || len(bad.grants) != 4 {
		t.Fatalf("join: %+v", bad)
	}
	_, _, good := cl.join(t, "other", "g", otherCred, api.JoinRequest{Topics: []string{c.Topic}, SessionTimeoutMs: 30_000})
	if good == nil {
		t.Fatal("second join refused")
	}
	owners := map[string]string{leakedJTI: bad.id, otherJTI: good.id}
	var view struct {
		Members []struct {
			ID         string `json:"id"`
			Credential *struct {
				ID      string `json:"id"`
				Subject string `json:"subject"`
			} `json:"credential"`
		} `json:"members"`
	}
	c.Admin(t, http.MethodGet, "/v1/admin/groups/g", nil, &view)
	for _, m := range view.Members {
		if m.Credential == nil || owners[m.Credential.ID] != m.ID || m.Credential.Subject == "" {
			t.Errorf("describe: member %s shows credential %+v", m.ID, m.Credential)
		}
	}
	cl.heartbeat(t, bad) // learns which partitions move to the other member
	var p int32
	var capability string
	for part, gs := range bad.grants {
		if !bad.revoke[part] {
			p, capability = part, gs[len(gs)-1].Capability
		}
	}
	var child api.CapabilityResponse
	status, raw := cl.coordinator(t, http.MethodPost, "/v1/capabilities/attenuate", capability, api.AttenuateRequest{Ops: []string{"fetch"}})
	if status != http.StatusOK || jsonInto(raw, &child) != nil {
		t.Fatalf("attenuate before the revocation: %d %s", status, raw)
	}
	gw := c.GatewayURLs()[0]
	if s, code := cl.fetch(t, gw, child.Capability, p); s != http.StatusOK {
		t.Fatalf("child fetch before the revocation: %d %s", s, code)
	}

	if status, raw := c.Admin(t, http.MethodPost, "/v1/admin/capabilities/"+leakedJTI+"/revoke", struct{}{}, nil); status != http.StatusOK {
		t.Fatalf("revoke credential: %d %s", status, raw)
	}

	if s, code := cl.heartbeat(t, bad); s == http.StatusOK {
		t.Errorf("heartbeat of the revoked credential's member: %d %s, want a refusal", s, code)
	}
	status, raw = cl.coordinator(t, http.MethodPost, "/v1/groups/g/commit", bad.token, api.CommitRequest{
		Offsets: []api.CommitOffset{{Topic: c.Topic, Partition: p, Offset: 0, Capability: capability}},
	})
	if status == http.StatusOK {
		t.Errorf("commit of the revoked credential's member: %d %s, want a refusal", status, raw)
	}
	sdk.Eventually(t, 10*time.Second, "the gateway refuses the member's capabilities", func() (bool, string) {
		for _, tok := range []string{capability, child.Capability} {
			if s, code := cl.fetch(t, gw, tok, p); s != http.StatusConflict || code != api.CodeCapabilityRevoked {
				return false, fmt.Sprintf("fetch %d %s", s, code)
			}
		}
		return true, ""
	})
	status, raw = cl.coordinator(t, http.MethodPost, "/v1/capabilities/attenuate", capability, api.AttenuateRequest{Ops: []string{"fetch"}})
	if status != http.StatusConflict || codeOf(raw) != api.CodeCapabilityRevoked {
		t.Errorf("attenuate after the revocation: %d %s, want 409 capability_revoked", status, raw)
	}
	status, code, _ := cl.join(t, "leaked", "g", leakedCred, api.JoinRequest{Topics: []string{c.Topic}})
	if status != http.StatusConflict || code != api.CodeCapabilityRevoked {
		t.Errorf("join with the revoked credential: %d %s, want 409 capability_revoked", status, code)
	}
	status, code, _ = cl.join(t, "leaked", "g", bad.token, api.JoinRequest{MemberID: bad.id, Topics: []string{c.Topic}})
	if status == http.StatusOK {
		t.Errorf("rejoin with the revoked member's token: %d, want a refusal", status)
	}
	sdk.Eventually(t, 10*time.Second, "every partition reassigned to the other member", func() (bool, string) {
		cl.heartbeat(t, good)
		d := c.Describe(t, "g")
		if len(d.Members) != 1 {
			return false, fmt.Sprintf("%d members", len(d.Members))
		}
		for _, part := range d.Partitions {
			if part.State != "owned" || part.Owner != good.id {
				return false, fmt.Sprintf("partition %d %s by %s", part.Partition, part.State, part.Owner)
			}
		}
		// The partition may be owned by the time of the describe though
		// the heartbeat before it was answered before the grant: wait
		// for the grant to reach the member too.
		if len(good.grants[p]) == 0 {
			return false, fmt.Sprintf("partition %d owned but not yet granted in a heartbeat", p)
		}
		return true, ""
	})
	gs := good.grants[p]
	if s, code := cl.fetch(t, gw, gs[len(gs)-1].Capability, p); s != http.StatusOK {
		t.Errorf("the other member's fetch of partition %d: %d %s", p, s, code)
	}
}
