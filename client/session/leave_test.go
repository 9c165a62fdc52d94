package session

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// A leave makes the coordinator answer the member's held heartbeat with
// unknown_member at the same time as the leave itself. Seen end to end
// (e2e/sdk): stopping on that heartbeat cancelled the leave's own request
// and Close reported "context canceled". The session must wait for
// LeaveDone instead.
func TestLeavingIgnoresUnknownMemberHeartbeat(t *testing.T) {
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute))))
	acts := h.step(CloseRequested{Now: h.now})
	hook := one[CallRevoke](t, acts)
	h.step(FetchDone{Now: h.now, ID: f.ID, Partition: pA, Canceled: true})
	c := one[Commit](t, h.step(HookDone{Now: h.now, ID: hook.ID}))
	one[Leave](t, h.step(CommitDone{Now: h.now, ID: c.ID}))

	acts = h.step(HeartbeatFailed{Now: h.now, Incarnation: h.s.Member().Incarnation, Code: api.CodeUnknownMember})
	none[Stop](t, acts)
	none[Rejoin](t, acts)
	if h.s.Status() != Leaving {
		t.Fatalf("status %s after the leave's unknown_member heartbeat, want leaving", h.s.Status())
	}
	one[Stop](t, h.step(LeaveDone{Now: h.now}))
}
