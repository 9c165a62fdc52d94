package tenants_test

import (
	"net/http"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestTakeoverByMemberID is defect 1 of issue #10: a capability's sub is
// its member's id, and capabilities are handed to third parties. Another
// credential allowed in the same group joins with that member_id. Before
// members were bound to their credential it received the member's token
// and capabilities for all its partitions at the same epochs, and two
// tenants read the same partitions at once. The test probes every
// partition through every gateway with every capability either tenant
// holds, round after round, and requires that no partition is ever
// admitted for both, and that the attacker is never admitted at all.
func TestTakeoverByMemberID(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 4, Gateways: 2})
	cl := client{c}
	victimCred, _ := cl.credential(t, "victim", "g")
	attackerCred, _ := cl.credential(t, "attacker", "g")
	_, code, victim := cl.join(t, "victim", "g", victimCred, api.JoinRequest{Topics: []string{c.Topic}, SessionTimeoutMs: 30_000})
	if victim == nil || len(victim.grants) != 4 {
		t.Fatalf("victim join: %v, %+v", code, victim)
	}
	stolen := subOf(victim.grants[0][0].Capability)
	status, code, attacker := cl.join(t, "attacker", "g", attackerCred,
		api.JoinRequest{MemberID: stolen, Topics: []string{c.Topic}, SessionTimeoutMs: 30_000})
	t.Logf("attacker's join with member_id %s: %d %s", stolen, status, code)

	parties := []*member{victim}
	if attacker != nil {
		parties = append(parties, attacker)
	}
	for round := range 8 {
		admitted := map[int32]map[string]bool{}
		for _, m := range parties {
			cl.heartbeat(t, m)
			for p, grants := range m.grants {
				for _, g := range grants {
					for _, url := range c.GatewayURLs() {
						if s, _ := cl.fetch(t, url, g.Capability, p); s == http.StatusOK {
							if admitted[p] == nil {
								admitted[p] = map[string]bool{}
							}
							admitted[p][m.name] = true
						}
					}
				}
			}
		}
		for p, holders := range admitted {
			if len(holders) > 1 {
				t.Errorf("round %d: partition %d admitted for two holders at once: %v", round, p, holders)
			}
			if holders["attacker"] {
				t.Errorf("round %d: partition %d admitted for the attacker", round, p)
			}
		}
		if len(admitted) != 4 {
			t.Errorf("round %d: the victim read %d of 4 partitions", round, len(admitted))
		}
	}
	if status != http.StatusConflict || code != api.CodeUnknownMember {
		t.Fatalf("attacker's join: %d %s, want 409 unknown_member", status, code)
	}
}

// TestTakeoverByInstanceID: the same attack with the victim's instance_id
// (static membership). Before, the attacker replaced the victim and took
// its partitions under fresh epochs; now the instance belongs to the
// credential that opened it.
func TestTakeoverByInstanceID(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 2})
	cl := client{c}
	victimCred, _ := cl.credential(t, "victim", "g")
	attackerCred, _ := cl.credential(t, "attacker", "g")
	_, _, victim := cl.join(t, "victim", "g", victimCred,
		api.JoinRequest{InstanceID: "svc-1", Topics: []string{c.Topic}, SessionTimeoutMs: 30_000})
	if victim == nil || len(victim.grants) != 2 {
		t.Fatalf("victim join: %+v", victim)
	}
	status, code, _ := cl.join(t, "attacker", "g", attackerCred,
		api.JoinRequest{InstanceID: "svc-1", Topics: []string{c.Topic}, SessionTimeoutMs: 30_000})
	if status != http.StatusConflict || code != api.CodeConflict {
		t.Errorf("attacker's join with the victim's instance_id: %d %s, want 409 conflict", status, code)
	}
	if s, code := cl.heartbeat(t, victim); s != http.StatusOK {
		t.Fatalf("victim's heartbeat after the attack: %d %s", s, code)
	}
	for p, grants := range victim.grants {
		if s, code := cl.fetch(t, c.GatewayURLs()[0], grants[len(grants)-1].Capability, p); s != http.StatusOK {
			t.Errorf("victim's fetch of partition %d after the attack: %d %s", p, s, code)
		}
	}
}

// TestRejoinAlwaysFences: the rightful credential (or the member's own
// token) may rejoin by member id, and every rejoin fences: the reply
// re-sends no capability, the partitions come back in heartbeats under
// higher epochs, and the capabilities of the old epochs are refused.
func TestRejoinAlwaysFences(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 3})
	cl := client{c}
	cred, _ := cl.credential(t, "svc", "g")
	_, _, m := cl.join(t, "m", "g", cred, api.JoinRequest{Topics: []string{c.Topic}, SessionTimeoutMs: 30_000})
	if m == nil || len(m.grants) != 3 {
		t.Fatalf("join: %+v", m)
	}
	gw := c.GatewayURLs()[0]
	rejoins := []struct {
		name, bearer string
	}{{"credential", cred}, {"member token", m.token}}
	for _, r := range rejoins {
		before := map[int32]api.Grant{}
		for p, gs := range m.grants {
			before[p] = gs[len(gs)-1]
		}
		status, code, again := cl.join(t, "m", "g", r.bearer,
			api.JoinRequest{MemberID: m.id, Topics: []string{c.Topic}, SessionTimeoutMs: 30_000})
		if again == nil {
			t.Fatalf("rejoin with the %s: %d %s", r.name, status, code)
		}
		for p, gs := range again.grants {
			t.Errorf("rejoin with the %s re-sent partition %d at epoch %d in its reply", r.name, p, gs[0].Epoch)
		}
		m.token = again.token
		sdk.Eventually(t, 10e9, "every partition granted again under a higher epoch", func() (bool, string) {
			cl.heartbeat(t, m)
			for p, old := range before {
				gs := m.grants[p]
				if gs[len(gs)-1].Epoch <= old.Epoch {
					return false, "partition still at its old epoch"
				}
			}
			return true, ""
		})
		for p, old := range before {
			if s, code := cl.fetch(t, gw, old.Capability, p); s != http.StatusConflict || code != api.CodeCapabilityRevoked {
				t.Errorf("after the rejoin with the %s, the old capability of partition %d: %d %s, want 409", r.name, p, s, code)
			}
			gs := m.grants[p]
			if s, code := cl.fetch(t, gw, gs[len(gs)-1].Capability, p); s != http.StatusOK {
				t.Errorf("after the rejoin with the %s, the new capability of partition %d: %d %s", r.name, p, s, code)
			}
		}
	}
	status, code, _ := cl.join(t, "m", "g", m.token, api.JoinRequest{MemberID: "someone-else", Topics: []string{c.Topic}})
	if status != http.StatusUnauthorized {
		t.Errorf("member token rejoining another member: %d %s, want 401", status, code)
	}
}
