package coordinator_test

import (
	"fmt"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestRestartMidHandoff closes the coordinator (and its store) while two
// partitions are being revoked — one released, one not, the gateway not
// yet acknowledging — and reopens it on the same data directory.
func TestRestartMidHandoff(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 4})
	e.fill(t, 1000) // commits name offsets up to 1000: the log must reach them
	h := e.start(t)
	gw := newGateway(h, "gw1")
	first := gw.poll(t, 0, 0)
	if !first.Reset || len(first.Keys) == 0 {
		t.Fatalf("first poll: %+v, want a reset with keys", first)
	}
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	a := h.join(t, "g", creds, api.JoinRequest{ClientID: "a", Topics: []string{"orders"}})
	for p := range int32(4) {
		if status, b := a.commit(t, "orders", p, 100+int64(p), false); status != 200 {
			t.Fatalf("commit: %d %s", status, b)
		}
	}
	b := h.join(t, "g", creds, api.JoinRequest{ClientID: "b", Topics: []string{"orders"}})
	revoke := a.heartbeat(t, 1000).Revoke
	if len(revoke) != 2 {
		t.Fatalf("revokes %+v, want 2", revoke)
	}
	released := revoke[0]
	if status, body := a.commit(t, released.Topic, released.Partition, 200+int64(released.Partition), true); status != 200 {
		t.Fatalf("release: %d %s", status, body)
	}
	before := h.describe(t, "g")
	revoking := 0
	for _, p := range before.Partitions {
		if p.State == "revoking" {
			revoking++
		}
	}
	if revoking != 2 {
		t.Fatalf("before restart: %d partitions revoking, want 2 (gateway has not acked)", revoking)
	}
	h.stop(t)

	h = e.start(t)
	gw.h, a.h, b.h = h, h, h
	after := h.describe(t, "g")
	checkRestored(t, before, after, a.id, b.id)
	reset := gw.poll(t, first.Seq, 0)
	if !reset.Reset || reset.Seq <= first.Seq || len(reset.Keys) == 0 || len(reset.Fences) != 4 {
		t.Fatalf("poll with the old seq after restart: %+v, want a reset above %d with keys and 4 fences", reset, first.Seq)
	}
	gw.run(500)
	defer gw.halt()

	// Members come back with their member tokens; the handoff completes.
	resp := a.heartbeat(t, 1000)
	a.releaseAll(t, resp.Revoke, func(r api.PartitionRef) int64 { return 200 + int64(r.Partition) })
	grants := map[int32]api.Grant{}
	eventually(t, func() string {
		for _, g := range b.heartbeat(t, 200).Grants {
			grants[g.Partition] = g
		}
		if len(grants) != 2 {
			return fmt.Sprintf("b has %d grants", len(grants))
		}
		return ""
	})
	for _, p := range before.Partitions {
		if p.State != "revoking" {
			continue
		}
		g, ok := grants[p.Partition]
		if !ok || g.Epoch < p.Epoch || g.Offset != 200+int64(p.Partition) {
			t.Fatalf("grant of %d: %+v; revoked at epoch %d", p.Partition, g, p.Epoch)
		}
	}
	for _, p := range h.describe(t, "g").Partitions {
		if p.State != "owned" {
			t.Fatalf("after the handoff: %+v", p)
		}
	}
}

// checkRestored compares a group before and after a restart: no epoch
// lower, committed offsets intact, handoffs and members still there.
func checkRestored(t *testing.T, before, after coordinator.GroupDescription, members ...string) {
	t.Helper()
	if len(after.Partitions) != len(before.Partitions) {
		t.Fatalf("partitions: %d after restart, %d before", len(after.Partitions), len(before.Partitions))
	}
	for i, p := range after.Partitions {
		old := before.Partitions[i]
		switch {
		case p.Epoch < old.Epoch:
			t.Fatalf("epoch went down: %+v, before %+v", p, old)
		case (p.Committed == nil) != (old.Committed == nil) || (p.Committed != nil && *p.Committed != *old.Committed):
			t.Fatalf("committed offset changed: %+v, before %+v", p, old)
		case p.State != old.State || p.Owner != old.Owner || p.Target != old.Target || p.Released != old.Released:
			t.Fatalf("handoff state changed: %+v, before %+v", p, old)
		}
	}
	alive := map[string]bool{}
	for _, m := range after.Members {
		alive[m.ID] = true
	}
	for _, id := range members {
		if !alive[id] {
			t.Fatalf("member %s not restored: %+v", id, after.Members)
		}
	}
	if after.Config != before.Config {
		t.Fatalf("config %+v, before %+v", after.Config, before.Config)
	}
}
