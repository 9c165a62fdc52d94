package kafkaclients

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/gateway"
)

// joinFor joins group with credential at the coordinator and returns
// the answer (a member of its own: a capability subject per join).
func joinFor(t *testing.T, s *Stack, credential, group string) api.JoinResponse {
	t.Helper()
	status, raw := postJoin(t, s.CoordinatorURL, credential, group, api.JoinRequest{ClientID: "tenant", Topics: []string{s.Topic}})
	var out api.JoinResponse
	if err := json.Unmarshal(raw, &out); err != nil || status != http.StatusOK || len(out.Grants) == 0 {
		t.Fatalf("join %s: %d %s", group, status, raw)
	}
	return out
}

// TestOneCredentialsMembersCountAsOneTenant is redteam7 #2 with the
// coordinator's own tokens: the capabilities of the members one client
// credential joined (a subject each) and the credential itself count
// against one kafka_max_connections_per_tenant (3 here) on the Kafka
// listener — the tenant the coordinator writes into each capability's
// tnt is the one the listener counts the credential under. Another
// credential's member still authenticates.
func TestOneCredentialsMembersCountAsOneTenant(t *testing.T) {
	s := Start(t, Options{Partitions: 1, Gateway: func(c *gateway.Config) { c.KafkaMaxConnectionsPerTenant = 3 }})
	groups := []string{"t1", "t2", "t3"}
	cred, err := s.Stack.ClientCredential(context.Background(), "tenant", groups, []string{s.Topic}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	addr := s.KafkaAddrs()[0]
	for _, g := range groups {
		capability := joinFor(t, s, cred, g).Grants[0].Capability
		if resp := dialRaw(t, addr).authenticate("PLAIN", capability); resp.ErrorCode != 0 {
			t.Fatalf("member of %s: SASL error %d", g, resp.ErrorCode)
		}
	}
	resp := dialRaw(t, addr).authenticate("OAUTHBEARER", cred)
	if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "kafka_max_connections_per_tenant") {
		t.Fatalf("the credential beside its 3 members' connections: error %d %v, want SASL_AUTHENTICATION_FAILED naming kafka_max_connections_per_tenant",
			resp.ErrorCode, resp.ErrorMessage)
	}
	other := s.ClientCredential(t, "t9")
	if resp := dialRaw(t, addr).authenticate("PLAIN", joinFor(t, s, other, "t9").Grants[0].Capability); resp.ErrorCode != 0 {
		t.Fatalf("another credential's member: SASL error %d", resp.ErrorCode)
	}
}
