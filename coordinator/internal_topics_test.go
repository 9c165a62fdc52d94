package coordinator_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestInternalTopicsAreNeverGranted is the attack of a tenant whose
// client credential allows any topic ("*"): it joined the coordinator's
// own state topic (every tenant's groups, members and committed offsets)
// or Kafka's __consumer_offsets, and read them through a gateway with
// the capabilities it was granted. Now naming one is 403 whatever the
// credential allows, and a topic_pattern matching everything gets only
// the tenants' topics. The same for another capgate deployment's state
// log on the same Kafka (capgate-state-b: redteam5 #4), which the
// coordinator only refused when it was its own.
func TestInternalTopicsAreNeverGranted(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2, "capgate-state": 1, "capgate-state-snapshots": 1, "__consumer_offsets": 3,
		"capgate-state-b": 1, "capgate-state-b-snapshots": 1})
	h := e.start(t)
	creds := h.clientCredential(t, []string{"*"}, []string{"*"})
	for i, topic := range []string{"capgate-state", "capgate-state-snapshots", "__consumer_offsets", "capgate-state-b", "capgate-state-b-snapshots"} {
		var got api.ErrorBody
		h.call(t, "POST", fmt.Sprintf("/v1/groups/g%d/join", i), creds, api.JoinRequest{Topics: []string{topic, "orders"}}, 403, &got)
		if got.Error.Code != api.CodeForbidden {
			t.Fatalf("join naming %s: %+v, want forbidden", topic, got)
		}
	}
	m := h.join(t, "all", creds, api.JoinRequest{TopicPattern: ".*"})
	eventually(t, func() string {
		m.heartbeat(t, 100)
		m.mu.Lock()
		defer m.mu.Unlock()
		if len(m.grants) != 2 {
			return fmt.Sprintf("%d grants %v, want orders' 2", len(m.grants), m.grants)
		}
		return ""
	})
	for _, g := range m.grants {
		if g.Topic != "orders" {
			t.Fatalf("a topic_pattern member was granted %s/%d", g.Topic, g.Partition)
		}
	}
}

// TestUnreservedStateTopicStillItsOwn: a deployment whose
// kafka_state.topic was named before capgate-state* was reserved
// ("legacy-state") still starts, and still never grants its own state
// topics (the name space covers everyone else's); the refusal says which
// rule refused it.
func TestUnreservedStateTopicStillItsOwn(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1, "legacy-state": 1, "legacy-state-snapshots": 1})
	e.cfg.KafkaState.Topic = "legacy-state"
	h := e.start(t)
	creds := h.clientCredential(t, []string{"*"}, []string{"*"})
	for i, topic := range []string{"legacy-state", "legacy-state-snapshots"} {
		var got api.ErrorBody
		h.call(t, "POST", fmt.Sprintf("/v1/groups/l%d/join", i), creds, api.JoinRequest{Topics: []string{topic}}, 403, &got)
		if got.Error.Code != api.CodeForbidden || !strings.Contains(got.Error.Message, "this coordinator's state") {
			t.Fatalf("join naming %s: %+v, want forbidden: this coordinator's state", topic, got)
		}
	}
	h.join(t, "orders", creds, api.JoinRequest{Topics: []string{"orders"}})
}

// TestHeldTopicBecomingInternalIsRevoked: a topic a member already holds
// when a restart makes it one no client is granted (an upgrade that
// reserves capgate-state*, here a kafka_state.topic set to it) is
// reported deleted at the first metadata read against the restored
// state: the member is told to revoke it (its epoch fenced at the
// gateways) and nothing grants or renews it again.
func TestHeldTopicBecomingInternalIsRevoked(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1, "legacy-state": 1})
	h := e.start(t)
	creds := h.clientCredential(t, []string{"*"}, []string{"*"})
	m := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders", "legacy-state"}})
	if _, ok := m.grant("legacy-state", 0); !ok {
		t.Fatalf("legacy-state/0 not granted before: %v", m.grants)
	}
	h.stop(t)
	e.cfg.KafkaState.Topic = "legacy-state"
	h = e.start(t)
	m = &member{h: h, group: "g", id: m.id, token: m.token, grants: map[string]api.Grant{}}
	start := time.Now()
	revoked := false
	eventually(t, func() string {
		resp := m.heartbeat(t, 100)
		for _, r := range resp.Revoke {
			revoked = revoked || r.Topic == "legacy-state"
		}
		for _, g := range append(resp.Grants, resp.Renew...) {
			if g.Topic == "legacy-state" {
				t.Fatalf("legacy-state/%d granted or renewed after it became internal", g.Partition)
			}
		}
		if !revoked {
			return "no revoke of legacy-state/0 told to the member"
		}
		return ""
	})
	t.Logf("revoked %v after the restart", time.Since(start))
}

// TestCredentialsNamingInternalTopicsRefused: a client credential or an
// OAuth client naming a topic no client is granted (Kafka's own, or a
// capgate state log of any deployment) is refused 403 at minting, in the
// join's words — it was minted and could never be used (redteam5 #7).
// A pattern that also covers other topics is fine: grants leave the
// reserved ones out.
func TestCredentialsNamingInternalTopicsRefused(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2, "capgate-state-b": 1, "__consumer_offsets": 3})
	h := e.start(t)
	for _, topics := range [][]string{{"capgate-state-b"}, {"orders", "__consumer_offsets"}, {"capgate-state*"}} {
		var got api.ErrorBody
		h.call(t, "POST", "/v1/admin/clients", e.adminToken, coordinator.ClientRequest{Name: "svc", Groups: []string{"g"}, Topics: topics}, 403, &got)
		if got.Error.Code != api.CodeForbidden || !strings.Contains(got.Error.Message, "no client is granted it") {
			t.Fatalf("client credential for %v: %+v, want forbidden naming why", topics, got)
		}
		h.call(t, "POST", "/v1/admin/oauth/clients", e.adminToken, coordinator.OAuthClientRequest{Name: "svc", Groups: []string{"g"}, Topics: topics}, 403, &got)
		if got.Error.Code != api.CodeForbidden {
			t.Fatalf("oauth client for %v: %+v, want forbidden", topics, got)
		}
	}
	var out coordinator.ClientResponse
	h.call(t, "POST", "/v1/admin/clients", e.adminToken, coordinator.ClientRequest{Name: "svc", Groups: []string{"g"}, Topics: []string{"orders", "capgate-*"}}, 200, &out)
}
