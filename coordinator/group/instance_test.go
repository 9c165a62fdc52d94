package group_test

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

// instancePoll sends a sync poll of gateway id from process instance,
// acknowledging after, and returns its ref.
func instancePoll(w *world, id, instance string, after uint64) group.Ref {
	ref := w.nextRef()
	w.step(group.SyncPoll{Ref: ref, Gateway: id, Instance: instance, After: after})
	return ref
}

func ackedBy(w *world, id string) (uint64, bool) {
	for _, gw := range w.m.Gateways() {
		if gw.ID == id {
			return gw.Acked, true
		}
	}
	return 0, false
}

// dupRevoked: gw1 follows the log; "dup", held by instance A, synced and
// acknowledged everything, then a's partition is revoked and A applies
// nothing more. It returns the revoke's ref and the revocation's seq.
func dupRevoked(t *testing.T, w *world) (group.Ref, uint64) {
	t.Helper()
	w.topics(map[string]int32{"orders": 1})
	w.pollUntilParked("gw1")
	reset := mustReply[group.SyncReply](t, w, instancePoll(w, "dup", "A", 0))
	held := instancePoll(w, "dup", "A", reset.Seq)
	w.join("g", "a", "orders")
	w.settle("g")
	w.pollUntilParked("gw1")
	if r, ok := w.replies[held].(group.SyncReply); ok {
		held = instancePoll(w, "dup", "A", r.Seq)
	}
	ref := w.nextRef()
	w.step(group.RevokePartition{Ref: ref, Group: "g", Topic: "orders", Partition: 0, Reason: "test"})
	w.pollUntilParked("gw1")
	fence := mustReply[group.SyncReply](t, w, held) // A was told; it never acknowledges
	if _, ok := w.replies[ref]; ok {
		t.Fatal("revoke answered before dup acknowledged")
	}
	return ref, fence.Seq
}

// TestSecondInstanceCannotAcknowledge: another process (instance B)
// polling under dup's id, acknowledging the revocation A has not
// applied, is refused 409 conflict and acknowledges nothing; its leave
// is refused too. Once A is silent past gateway_timeout (fence: it has
// self-fenced) B takes the id as a new gateway, and then A is refused.
func TestSecondInstanceCannotAcknowledge(t *testing.T) {
	w := newWorld(t)
	ref, seq := dupRevoked(t, w)
	mustReject(t, w, instancePoll(w, "dup", "B", seq), api.CodeConflict)
	leave := w.nextRef()
	w.step(group.GatewayLeave{Ref: leave, Gateway: "dup", Instance: "B"})
	mustReject(t, w, leave, api.CodeConflict)
	if acked, ok := ackedBy(w, "dup"); !ok || acked >= seq {
		t.Fatalf("dup acked %d (listed %v) after B's poll and leave, want below %d", acked, ok, seq)
	}
	if _, ok := w.replies[ref]; ok {
		t.Fatal("revoke answered on B's poll")
	}
	w.advance(w.cfg.GatewayTimeout / 2)
	mustReject(t, w, instancePoll(w, "dup", "B", seq), api.CodeConflict)

	w.advance(w.cfg.GatewayTimeout)
	mustReply[group.RevokeReply](t, w, ref) // A safe by silence
	if r := mustReply[group.SyncReply](t, w, instancePoll(w, "dup", "B", 0)); !r.Reset {
		t.Fatalf("B's first poll after A's silence: %+v, want a reset (a new gateway)", r)
	}
	mustReject(t, w, instancePoll(w, "dup", "A", seq), api.CodeConflict)
}

// TestSecondInstanceUnderServeWaitsForALeave: with silent_gateways:
// serve a silent holder may still serve, so it keeps the id until a
// leave (its own, or one without instance on its behalf); a poll without
// instance (a gateway from before nonces) is served as ever.
func TestSecondInstanceUnderServeWaitsForALeave(t *testing.T) {
	w := newWorld(t, func(c *group.Config) { c.SilentGateways = group.SilentGatewaysServe })
	_, seq := dupRevoked(t, w)
	w.advance(w.cfg.GatewayTimeout + time.Second)
	mustReject(t, w, instancePoll(w, "dup", "B", 0), api.CodeConflict)
	leave := w.nextRef()
	w.step(group.GatewayLeave{Ref: leave, Gateway: "dup"})
	mustReply[group.Done](t, w, leave)
	mustReply[group.SyncReply](t, w, instancePoll(w, "dup", "B", 0))
	if r, refused := w.replies[instancePoll(w, "dup", "", seq)].(group.Rejected); refused { // no nonce: as before (held: nothing newer)
		t.Fatalf("a poll without instance refused: %+v", r)
	}
	if acked, _ := ackedBy(w, "dup"); acked != seq {
		t.Fatalf("dup acked %d after a poll without instance, want %d", acked, seq)
	}
}

// TestRestartedInstanceTakesTheIDAfterItsLeave: A leaves cleanly; a new
// process under the id is served at once, long before gateway_timeout.
func TestRestartedInstanceTakesTheIDAfterItsLeave(t *testing.T) {
	w := newWorld(t)
	reset := mustReply[group.SyncReply](t, w, instancePoll(w, "dup", "A", 0))
	instancePoll(w, "dup", "A", reset.Seq)
	leave := w.nextRef()
	w.step(group.GatewayLeave{Ref: leave, Gateway: "dup", Instance: "A"})
	mustReply[group.Done](t, w, leave)
	mustReply[group.SyncReply](t, w, instancePoll(w, "dup", "A2", 0))
}
