package session

import (
	"slices"
	"testing"
	"time"
)

// revokeHolding delivers 20 records of A to a ManualMarks user, marks the
// first marked of them, then revokes A; it returns the actions of the
// step that ends the revoke's own waits (the cancelled fetch came back,
// the hook returned), when only the user can still hold the release back.
func revokeHolding(t *testing.T, h *harness, marked int64) []Action {
	t.Helper()
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute))))
	next := one[Fetch](t, h.complete(f, 20))
	if got := offsetsOf(h.poll(), pA); len(got) != 20 {
		t.Fatalf("delivered %v", got)
	}
	if marked > 0 {
		h.step(Marked{Now: h.now, Marks: []Mark{{Partition: pA, Epoch: 1, Offset: marked}}})
	}
	h.advance(time.Second)
	acts := h.revoke(pA, 1)
	hook := one[CallRevoke](t, acts)
	if c := one[CancelFetch](t, acts); c.ID != next.ID {
		t.Fatalf("cancelled %d, want the fetch in flight %d", c.ID, next.ID)
	}
	none[Commit](t, h.step(FetchDone{Now: h.now, ID: next.ID, Partition: pA, Canceled: true}))
	return h.step(HookDone{Now: h.now, ID: hook.ID})
}

// release is the one release commit of A in acts, at offset want.
func release(t *testing.T, acts []Action, want int64) {
	t.Helper()
	c := one[Commit](t, acts)
	if !c.Release || len(c.Offsets) != 1 || c.Offsets[0].Partition != pA.Partition || c.Offsets[0].Offset != want {
		t.Fatalf("commit %+v, want the release of A at %d", c, want)
	}
}

// TestManualMarksRevokeWaitsForTheUser: with ManualMarks, a revoke that
// arrives while the user holds records Poll handed it (capgate consume
// printing a batch) does not release the partition when the hook
// returns — the next holder would read those records at the same time —
// but once the user is done with them: marks up to the last delivered
// record, or the user comes back (the next Poll, a Commit of everything,
// Close), releasing at the marked offset. The bug: released at the hook.
func TestManualMarksRevokeWaitsForTheUser(t *testing.T) {
	for _, tc := range []struct {
		name string
		done func(h *harness) []Action
		want int64 // the offset released at
	}{
		{"marks up to the last record", func(h *harness) []Action {
			return h.step(Marked{Now: h.now, Marks: []Mark{{Partition: pA, Epoch: 1, Offset: 20}}})
		}, 20},
		{"the next poll", func(h *harness) []Action {
			acts := h.step(Polled{Now: h.now})
			if len(one[Deliver](h.t, acts).Batches) != 0 {
				h.t.Fatalf("delivered records of a revoked partition")
			}
			return acts
		}, 19},
		{"a commit of everything", func(h *harness) []Action { return h.step(CommitRequested{Now: h.now, Ticket: 1}) }, 19},
		{"a background commit of everything", func(h *harness) []Action {
			return h.step(CommitRequested{Now: h.now, Ticket: 1, Async: true})
		}, 19},
		{"close", func(h *harness) []Action { return h.step(CloseRequested{Now: h.now}) }, 19},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := manualHarness(t)
			none[Commit](t, revokeHolding(t, h, 5))
			revoked := h.now
			if d := h.s.NextDeadline(); !d.Equal(revoked.Add(h.s.cfg.RevokeTimeout)) {
				t.Fatalf("deadline %v, want the revoke timeout %v", d, revoked.Add(h.s.cfg.RevokeTimeout))
			}
			h.advance(time.Second)
			none[Commit](t, h.step(Tick{Now: h.now}))
			acts := h.step(Marked{Now: h.now, Marks: []Mark{{Partition: pA, Epoch: 1, Offset: 19}}})
			none[Commit](t, acts) // one record still unmarked
			acts = tc.done(h)
			release(t, acts, tc.want)
			none[RevokeTimedOut](t, acts)
		})
	}
}

// TestManualMarksRevokeOfRecordsAlreadyDoneWith: a user that came back
// after its last records of A (it polled again) holds none of them: the
// revoke releases A as soon as the hook returned, at the marked offset
// (records left unmarked are the next holder's).
func TestManualMarksRevokeOfRecordsAlreadyDoneWith(t *testing.T) {
	h := manualHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute))))
	next := one[Fetch](t, h.complete(f, 20))
	h.poll()
	h.step(Marked{Now: h.now, Marks: []Mark{{Partition: pA, Epoch: 1, Offset: 7}}})
	h.poll() // came back: done with the 20
	acts := h.revoke(pA, 1)
	hook := one[CallRevoke](t, acts)
	h.step(FetchDone{Now: h.now, ID: next.ID, Partition: pA, Canceled: true})
	release(t, h.step(HookDone{Now: h.now, ID: hook.ID}), 7)
}

// TestManualMarksRevokeTimesOut: a user that neither marks nor comes back
// holds the release for RevokeTimeout, not longer; then the partition is
// released at its marked offset and RevokeTimedOut names what the next
// holder reads again (the shell logs it).
func TestManualMarksRevokeTimesOut(t *testing.T) {
	h := manualHarness(t)
	none[Commit](t, revokeHolding(t, h, 5))
	deadline := h.now.Add(h.s.cfg.RevokeTimeout)
	if d := h.s.NextDeadline(); !d.Equal(deadline) {
		t.Fatalf("deadline %v, want %v", d, deadline)
	}
	h.now = deadline.Add(-time.Millisecond)
	none[Commit](t, h.step(Tick{Now: h.now}))
	h.now = deadline
	acts := h.step(Tick{Now: h.now})
	release(t, acts, 5)
	overdue := one[RevokeTimedOut](t, acts)
	want := []Overdue{{Partition: pA, Processed: 5, Delivered: 20}}
	if !slices.Equal(overdue.Partitions, want) || overdue.Timeout != h.s.cfg.RevokeTimeout {
		t.Fatalf("revoke timed out %+v, want %+v after %s", overdue, want, h.s.cfg.RevokeTimeout)
	}
	if d := h.s.NextDeadline(); !d.IsZero() {
		t.Fatalf("deadline %v after the release was sent", d)
	}
}

// TestRevokeTimeoutReportedWithoutManualMarks: the default mode's release
// at RevokeTimeout (no Poll or Commit came) is reported the same way; a
// release the user acknowledged is not.
func TestRevokeTimeoutReportedWithoutManualMarks(t *testing.T) {
	h := newHarness(t)
	none[Commit](t, revokeHolding(t, h, 0))
	h.advance(h.s.cfg.RevokeTimeout)
	acts := h.step(Tick{Now: h.now})
	release(t, acts, 0)
	if got := one[RevokeTimedOut](t, acts).Partitions; !slices.Equal(got, []Overdue{{Partition: pA, Processed: 0, Delivered: 20}}) {
		t.Fatalf("revoke timed out %+v", got)
	}

	h = newHarness(t)
	none[Commit](t, revokeHolding(t, h, 0))
	acts = h.step(Polled{Now: h.now})
	release(t, acts, 20)
	none[RevokeTimedOut](t, acts)
}
