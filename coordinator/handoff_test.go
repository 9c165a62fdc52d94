package coordinator_test

import (
	"fmt"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// threeMembers joins a, b and c to group "g" over the 12 partitions of
// "orders" with a gateway acknowledging everything, every partition
// committed at 100+p, and returns them settled at 4 partitions each.
func threeMembers(t *testing.T, h *harness) (creds string, members []*member) {
	t.Helper()
	creds = h.clientCredential(t, []string{"g"}, []string{"orders"})
	commitAt := func(r api.PartitionRef) int64 { return 100 + int64(r.Partition) }
	a := h.join(t, "g", creds, api.JoinRequest{ClientID: "a", Topics: []string{"orders"}})
	if len(a.grants) != 12 {
		t.Fatalf("first member got %d grants, want 12", len(a.grants))
	}
	for p := range int32(12) {
		if status, b := a.commit(t, "orders", p, 100+int64(p), false); status != 200 {
			t.Fatalf("commit: %d %s", status, b)
		}
	}
	members = []*member{a}
	for i, id := range []string{"b", "c"} {
		members = append(members, h.join(t, "g", creds, api.JoinRequest{ClientID: id, Topics: []string{"orders"}}))
		want := make([]int, len(members))
		for j := range want {
			want[j] = 12 / (i + 2)
		}
		settle(t, h, members, want, commitAt)
	}
	return creds, members
}

// TestHandoffOverHTTP is the mailing-list protocol end to end: a 4th member
// joins 3 over 12 partitions; exactly 3 partitions move, each old owner's
// held heartbeat returns its revoke, and after commit+release and the
// gateway's ack the newcomer's heartbeat returns each grant at the
// committed offset under a higher epoch.
func TestHandoffOverHTTP(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 12})
	e.fill(t, 1000) // commits name offsets up to 1000: the log must reach them
	h := e.start(t)
	gw := newGateway(h, "gw1")
	gw.run(500)
	defer gw.halt()
	creds, members := threeMembers(t, h)
	before := map[string]coordinator.PartitionView{}
	for _, p := range h.describe(t, "g").Partitions {
		before[partitionKey(p.Topic, p.Partition)] = p
	}

	held := make([]<-chan heartbeatResult, 3)
	for i, m := range members {
		held[i] = m.heldHeartbeat(5000)
	}
	eventually(t, func() string {
		if n := h.metric(t, "capgate_coordinator_heartbeats_held"); n != 3 {
			return fmt.Sprintf("%v heartbeats held, want 3", n)
		}
		return ""
	})
	d := h.join(t, "g", creds, api.JoinRequest{ClientID: "d", Topics: []string{"orders"}})
	if len(d.grants) != 0 {
		t.Fatalf("newcomer got %d grants at join; every partition is owned", len(d.grants))
	}

	moved := map[string]coordinator.PartitionView{}
	for _, p := range h.describe(t, "g").Partitions {
		key := partitionKey(p.Topic, p.Partition)
		old := before[key]
		switch {
		case p.State == "revoking":
			if p.Target != d.id || p.Epoch != old.Epoch+1 || p.OwnerEpoch != old.Epoch || p.Owner != old.Owner {
				t.Fatalf("revoking %+v; before %+v", p, old)
			}
			moved[key] = old
		case p.State != "owned" || p.Owner != old.Owner || p.Epoch != old.Epoch:
			t.Fatalf("unmoved partition touched: %+v, before %+v", p, old)
		}
	}
	if len(moved) != 3 {
		t.Fatalf("%d partitions move, want exactly 3", len(moved))
	}

	newcomer := d.heldHeartbeat(5000)
	for i, m := range members {
		resp := (<-held[i]).must(t)
		if len(resp.Revoke) != 1 {
			t.Fatalf("member %s: held heartbeat returned %+v, want one revoke", m.id, resp)
		}
		r := resp.Revoke[0]
		old, ok := moved[partitionKey(r.Topic, r.Partition)]
		if !ok || old.Owner != m.id || r.Epoch != old.Epoch {
			t.Fatalf("member %s: revoke %+v, moved %+v", m.id, r, moved)
		}
		if status, b := m.commit(t, r.Topic, r.Partition, 500+int64(r.Partition), true); status != 200 {
			t.Fatalf("release: %d %s", status, b)
		}
	}

	got := map[string]api.Grant{}
	first := (<-newcomer).must(t)
	for _, g := range first.Grants {
		got[partitionKey(g.Topic, g.Partition)] = g
	}
	eventually(t, func() string {
		for _, g := range d.heartbeat(t, 200).Grants {
			got[partitionKey(g.Topic, g.Partition)] = g
		}
		if len(got) < 3 {
			return fmt.Sprintf("newcomer has %d grants", len(got))
		}
		return ""
	})
	for key, g := range got {
		old, ok := moved[key]
		if !ok || g.Offset != 500+int64(g.Partition) || g.Epoch != old.Epoch+1 {
			t.Fatalf("grant %s: %+v; want offset %d epoch %d", key, g, 500+g.Partition, old.Epoch+1)
		}
		claims := claimsOf(t, g.Capability)
		if claims["ep"] != float64(g.Epoch) || claims["sub"] != d.id || claims["grp"] != "g" {
			t.Fatalf("capability claims %v for grant %+v", claims, g)
		}
	}

	// The old owner's epoch is stale now; the new owner cannot go back.
	for key, old := range moved {
		for _, m := range members {
			if m.id != old.Owner {
				continue
			}
			status, b := m.commit(t, old.Topic, old.Partition, 600, false)
			if status != 409 || errorCode(t, b) != api.CodeStaleEpoch {
				t.Fatalf("stale commit %s: %d %s", key, status, b)
			}
		}
		status, b := d.commit(t, old.Topic, old.Partition, 400, false)
		if status != 409 || errorCode(t, b) != api.CodeOffsetRegression {
			t.Fatalf("regressing commit %s: %d %s", key, status, b)
		}
	}
	if n := h.metric(t, "capgate_coordinator_handoff_duration_seconds_count"); n < 3 {
		t.Fatalf("handoff histogram count %v, want >= 3", n)
	}
}
