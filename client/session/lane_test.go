package session

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// A background commit in flight with no answer (no coordinator) holds
// nothing up: polls go on delivering, fetches go on, and the requests
// made meanwhile wait, merged into one commit of the latest offsets.
func TestAsyncCommitDoesNotHoldPolls(t *testing.T) {
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute))))
	f = one[Fetch](t, h.complete(f, 3))
	h.poll()
	first := one[Commit](t, h.step(CommitRequested{Now: h.now, Ticket: 1, Async: true}))
	if first.Ticket != 0 || !slices.Equal(first.Offsets, []api.CommitOffset{{Topic: "orders", Partition: 0, Offset: 3, Capability: "capA"}}) {
		t.Fatalf("first background commit %+v", first)
	}
	for i, want := range []int64{3, 5, 7} { // the coordinator is away
		next := one[Fetch](t, h.complete(f, 2))
		if got := offsetsOf(h.poll(), pA); len(got) != 2 || got[0] != want {
			t.Fatalf("poll %d with a commit in flight delivered %v, want 2 from %d", i, got, want)
		}
		f = next
		acts := h.step(CommitRequested{Now: h.now, Ticket: uint64(2 + i), Async: true})
		none[Commit](t, acts)
		if i > 0 { // one request waits at most: the others merge into it
			if m := one[CommitMerged](t, acts); m.Ticket != uint64(2+i) || m.Into != 2 {
				t.Fatalf("merged %+v, want %d into 2", m, 2+i)
			}
		}
	}
	// The first one fails after request_timeout: it is reported; the
	// merged one goes at once with the latest processed offset.
	boom := errors.New("request_timeout passed")
	acts := h.step(CommitDone{Now: h.now, ID: first.ID, Code: api.CodeUnavailable, Err: boom})
	if r := one[CommitResult](t, acts); r.Ticket != 1 || r.Code != api.CodeUnavailable || r.Err != boom {
		t.Fatalf("first result %+v", r)
	}
	merged := one[Commit](t, acts)
	if merged.Offsets[0].Offset != 9 {
		t.Fatalf("merged commit at %d, want 9 (all delivered before the last request)", merged.Offsets[0].Offset)
	}
	if r := one[CommitResult](t, h.step(CommitDone{Now: h.now, ID: merged.ID})); r.Ticket != 2 || r.Code != "" || r.Err != nil {
		t.Fatalf("merged result %+v, want ticket 2 (answering 3 and 4) accepted", r)
	}
	if p := h.s.parts[pA]; p.committed != 9 {
		t.Fatalf("committed %d", p.committed)
	}
}

// Commits that are not releases go one at a time: a user commit waits
// for the background one in flight, so the two never race each other to
// the coordinator (the later, lower one would be refused
// offset_regression).
func TestCommitWaitsForTheLane(t *testing.T) {
	h, bg := backgroundInFlight(t)
	none[Commit](t, h.step(CommitRequested{Now: h.now, Ticket: 2}))
	acts := h.step(CommitDone{Now: h.now, ID: bg.ID})
	if r := one[CommitResult](t, acts); r.Ticket != 1 || r.Err != nil {
		t.Fatalf("background result %+v", r)
	}
	user := one[Commit](t, acts)
	if user.Ticket != 2 || user.Offsets[0].Offset != 5 {
		t.Fatalf("user commit %+v, want ticket 2 at 5", user)
	}
	// ... and a background request waits for the user's.
	none[Commit](t, h.step(CommitRequested{Now: h.now, Ticket: 3, Async: true}))
	acts = h.step(CommitDone{Now: h.now, ID: user.ID})
	// Nothing moved since: the background request is answered right
	// after the user's, nothing sent.
	if rs := all[CommitResult](acts); len(rs) != 2 || rs[0].Ticket != 2 || rs[1].Ticket != 3 || rs[0].Err != nil || rs[1].Err != nil {
		t.Fatalf("results %+v", rs)
	}
	none[Commit](t, acts)
	if rs := all[CommitResult](h.step(Tick{Now: h.now})); len(rs) != 0 {
		t.Fatalf("answered twice: %+v", rs)
	}
}

// Named offsets are checked at once (nothing waits on a bad one), move
// the processed offset forward only, and a refusal of the merged commit
// reaches every request it carried.
func TestAsyncCommitNamedOffsets(t *testing.T) {
	h := newHarness(t)
	h.s.cfg.ManualMarks = true
	acts := h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute)), grant(pB, 1, 0, "capB", t0.Add(time.Minute)))
	for _, f := range all[Fetch](acts) {
		h.complete(f, 4)
	}
	h.poll()
	r := one[CommitResult](t, h.step(CommitRequested{Now: h.now, Ticket: 1, Async: true, Offsets: []Mark{{Partition: pA, Epoch: 1, Offset: 9}}}))
	if r.Ticket != 1 || r.Code != api.CodeBadRequest {
		t.Fatalf("offset beyond the delivered: %+v", r)
	}
	first := one[Commit](t, h.step(CommitRequested{Now: h.now, Ticket: 2, Async: true, Offsets: []Mark{{Partition: pA, Epoch: 1, Offset: 1}}}))
	none[Commit](t, h.step(CommitRequested{Now: h.now, Ticket: 3, Async: true, Offsets: []Mark{{Partition: pA, Epoch: 1, Offset: 3}}}))
	one[CommitMerged](t, h.step(CommitRequested{Now: h.now, Ticket: 4, Async: true, Offsets: []Mark{{Partition: pA, Epoch: 1, Offset: 2}, {Partition: pB, Epoch: 1, Offset: 4}}}))
	acts = h.step(CommitDone{Now: h.now, ID: first.ID})
	if r := one[CommitResult](t, acts); r.Ticket != 2 || r.Err != nil {
		t.Fatalf("first result %+v", r)
	}
	merged := one[Commit](t, acts)
	want := []api.CommitOffset{{Topic: "orders", Partition: 0, Offset: 3, Capability: "capA"}, {Topic: "orders", Partition: 1, Offset: 4, Capability: "capB"}}
	if !slices.Equal(merged.Offsets, want) {
		t.Fatalf("merged %+v, want A at 3 (a later 2 never moves it back) and B at 4", merged.Offsets)
	}
	// The coordinator refuses one partition: split, one at a time; the
	// refusal reaches the request (3, and 4 merged into it).
	acts = h.step(CommitDone{Now: h.now, ID: merged.ID, Code: api.CodeStaleEpoch})
	split := all[Commit](acts)
	if len(split) != 2 {
		t.Fatalf("split into %d", len(split))
	}
	h.step(CommitDone{Now: h.now, ID: split[0].ID})
	acts = h.step(CommitDone{Now: h.now, ID: split[1].ID, Code: api.CodeStaleEpoch})
	if r := one[CommitResult](t, acts); r.Ticket != 3 || r.Code != api.CodeStaleEpoch {
		t.Fatalf("result %+v", r)
	}
}

// A background request still waiting when the member loses its
// partitions or closes is answered with an error: it was never sent.
func TestAsyncCommitNotSentIsReported(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(h *harness) []Action
		code api.Code
	}{
		{"lost", func(h *harness) []Action {
			return h.step(HeartbeatFailed{Now: h.now, Incarnation: h.s.Member().Incarnation, Code: api.CodeUnknownMember})
		}, api.CodeUnknownMember},
		{"closing", func(h *harness) []Action { return h.step(CloseRequested{Now: h.now}) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, bg := backgroundInFlight(t)
			none[Commit](t, h.step(CommitRequested{Now: h.now, Ticket: 2, Async: true}))
			acts := tc.end(h)
			acts = append(acts, h.step(CommitDone{Now: h.now, ID: bg.ID})...)
			var waited *CommitResult
			for _, r := range all[CommitResult](acts) {
				if r.Ticket == 2 {
					waited = &r
				}
			}
			if waited == nil || waited.Err == nil || waited.Code != tc.code {
				t.Fatalf("waiting request answered %+v in %s, want an error with code %q", waited, describe(acts), tc.code)
			}
		})
	}
}

// Timed commits share the lane: none is sent while a user commit is in
// flight; the one that came due goes right after it.
func TestTimedCommitsShareTheLane(t *testing.T) {
	h := newHarness(t)
	h.s.cfg.CommitInterval = time.Second
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute))))
	f = one[Fetch](t, h.complete(f, 3))
	h.poll()
	user := one[Commit](t, h.step(CommitRequested{Now: h.now, Ticket: 1}))
	h.complete(f, 2)
	h.poll()
	h.poll() // the 2 are processed
	h.advance(2 * time.Second)
	if !h.s.NextDeadline().IsZero() {
		t.Fatalf("a timed commit is due while the user's is in flight: %s", h.s.NextDeadline())
	}
	none[Commit](t, h.step(Tick{Now: h.now}))
	acts := h.step(CommitDone{Now: h.now, ID: user.ID})
	timed := one[Commit](t, acts)
	if timed.Ticket != 0 || timed.Offsets[0].Offset != 5 {
		t.Fatalf("timed commit %+v", timed)
	}
}

// backgroundInFlight: pA delivered 0..2 and committed in the background
// (ticket 1, in flight, returned), then 3..4 delivered and polled past.
func backgroundInFlight(t *testing.T) (*harness, Commit) {
	t.Helper()
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute))))
	f = one[Fetch](t, h.complete(f, 3))
	h.poll()
	bg := one[Commit](t, h.step(CommitRequested{Now: h.now, Ticket: 1, Async: true}))
	h.complete(f, 2)
	h.poll()
	return h, bg
}

// A user commit waiting for the lane when the member is lost is answered
// with an error, not with success: the partitions it was to commit are
// gone uncommitted (a release would have committed them; a lost member
// commits nothing).
func TestCommitWaitingWhenLostIsRefused(t *testing.T) {
	h, bg := backgroundInFlight(t)
	none[Commit](t, h.step(CommitRequested{Now: h.now, Ticket: 2}))
	acts := h.step(HeartbeatFailed{Now: h.now, Incarnation: h.s.Member().Incarnation, Code: api.CodeUnknownMember})
	acts = append(acts, h.step(CommitDone{Now: h.now, ID: bg.ID})...)
	none[Commit](t, acts)
	var waited *CommitResult
	for _, r := range all[CommitResult](acts) {
		if r.Ticket == 2 {
			waited = &r
		}
	}
	if waited == nil || waited.Err == nil || waited.Code != api.CodeUnknownMember {
		t.Fatalf("waiting user commit answered %+v in %s, want unknown_member", waited, describe(acts))
	}
}
