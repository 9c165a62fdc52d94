package session

import (
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

func manualHarness(t *testing.T) *harness {
	t.Helper()
	cfg := testConfig()
	cfg.ManualMarks = true
	return &harness{t: t, s: New(cfg), now: t0}
}

// TestManualMarksCommitOnlyMarked: with ManualMarks, a Poll does not
// count the records before as processed; a commit and a Close commit
// exactly the marked offset (the CLI's --max-records N commits N).
func TestManualMarksCommitOnlyMarked(t *testing.T) {
	h := manualHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute))))
	h.complete(f, 20)
	if got := offsetsOf(h.poll(), pA); len(got) != 20 {
		t.Fatalf("delivered %v", got)
	}
	h.poll() // nothing more, and no acknowledgement of the 20
	none[Commit](t, h.step(CommitRequested{Now: h.now, Ticket: 1}))
	h.step(Marked{Now: h.now, Marks: []Mark{{Partition: pA, Epoch: 1, Offset: 5}}})
	h.step(Marked{Now: h.now, Marks: []Mark{{Partition: pA, Epoch: 1, Offset: 3}}}) // behind: ignored
	h.step(Marked{Now: h.now, Marks: []Mark{{Partition: pA, Epoch: 2, Offset: 9}}}) // other epoch: ignored
	acts := h.step(CloseRequested{Now: h.now})
	r := one[CallRevoke](t, acts)
	cf := one[CancelFetch](t, acts)
	h.step(FetchDone{Now: h.now, ID: cf.ID, Partition: pA, Canceled: true})
	acts = h.step(HookDone{Now: h.now, ID: r.ID})
	c := one[Commit](t, acts)
	if !c.Release || len(c.Offsets) != 1 || c.Offsets[0].Offset != 5 {
		t.Fatalf("close committed %+v, want A at 5 with release", c)
	}
}

// TestExplicitCommitOffsets: Commit with offsets commits exactly those;
// an offset beyond what was delivered, behind the committed one or of an
// epoch not held sends nothing and says why.
func TestExplicitCommitOffsets(t *testing.T) {
	h := newHarness(t)
	acts := h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute)), grant(pB, 1, 0, "capB", t0.Add(time.Minute)))
	for _, f := range all[Fetch](acts) {
		h.complete(f, 10)
	}
	h.poll()
	for _, bad := range []struct {
		mark Mark
		code api.Code
	}{
		{Mark{Partition: pA, Epoch: 1, Offset: 11}, api.CodeBadRequest},
		{Mark{Partition: pA, Epoch: 2, Offset: 4}, api.CodeStaleEpoch},
		{Mark{Partition: Partition{"other", 0}, Epoch: 1, Offset: 4}, api.CodeStaleEpoch},
	} {
		acts := h.step(CommitRequested{Now: h.now, Ticket: 1, Offsets: []Mark{{Partition: pB, Epoch: 1, Offset: 2}, bad.mark}})
		none[Commit](t, acts)
		if r := one[CommitResult](t, acts); r.Code != bad.code || r.Err == nil {
			t.Fatalf("%+v: result %+v, want %s", bad.mark, r, bad.code)
		}
	}
	acts = h.step(CommitRequested{Now: h.now, Ticket: 2, Offsets: []Mark{{Partition: pA, Epoch: 1, Offset: 4}}})
	c := one[Commit](t, acts)
	want := []api.CommitOffset{{Topic: "orders", Partition: 0, Offset: 4, Capability: "capA"}}
	if !slices.Equal(c.Offsets, want) {
		t.Fatalf("commit %+v, want exactly A at 4", c.Offsets)
	}
	h.step(CommitDone{Now: h.now, ID: c.ID})
	acts = h.step(CommitRequested{Now: h.now, Ticket: 3, Offsets: []Mark{{Partition: pA, Epoch: 1, Offset: 2}}})
	if r := one[CommitResult](t, acts); r.Code != api.CodeOffsetRegression {
		t.Fatalf("commit below the committed offset: %+v", r)
	}
}

// TestTimedCommitAlsoWhenIdle: with CommitInterval, processed offsets are
// committed at the next deadline after the last timed commit, without a
// Poll or Commit in between (a consumer that caught up and went idle),
// one timed commit at a time; nothing is due when nothing moved.
func TestTimedCommitAlsoWhenIdle(t *testing.T) {
	cfg := testConfig()
	cfg.CommitInterval = time.Second
	h := &harness{t: t, s: New(cfg), now: t0}
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute))))
	if d := h.s.NextDeadline(); !d.IsZero() {
		t.Fatalf("deadline %v with nothing processed", d)
	}
	h.complete(f, 7)
	h.poll()
	h.step(Polled{Now: h.now}) // the consumer waits for more: the 7 are processed
	if d := h.s.NextDeadline(); !d.Equal(t0.Add(time.Second)) {
		t.Fatalf("deadline %v, want a second after the join", d)
	}
	h.advance(time.Second)
	c := one[Commit](t, h.step(Tick{Now: h.now}))
	if c.Ticket != 0 || c.Release || c.Offsets[0].Offset != 7 {
		t.Fatalf("timed commit %+v", c)
	}
	if d := h.s.NextDeadline(); !d.IsZero() {
		t.Fatalf("deadline %v with a timed commit in flight", d)
	}
	h.step(CommitDone{Now: h.now, ID: c.ID})
	if d := h.s.NextDeadline(); !d.IsZero() {
		t.Fatalf("deadline %v with everything committed", d)
	}
}

// TestCommitNearExpiryIsNotDropped: a partition whose capability is about
// to expire (or expired) is committed with it all the same; the
// coordinator's refusal of that one partition reaches the user while the
// others commit (the bug: it was left out and Commit returned nil).
func TestCommitNearExpiryIsNotDropped(t *testing.T) {
	h := newHarness(t)
	acts := h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute)), grant(pB, 1, 0, "capB", t0.Add(3*time.Second)))
	for _, f := range all[Fetch](acts) {
		h.complete(f, 5)
	}
	h.poll()
	h.advance(4 * time.Second) // B's capability expired
	c := one[Commit](t, h.step(CommitRequested{Now: h.now, Ticket: 1}))
	if len(c.Offsets) != 2 {
		t.Fatalf("commit %+v, want both partitions", c.Offsets)
	}
	if !c.Until.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("until %v, want B's expiry", c.Until)
	}
	acts = h.step(CommitDone{Now: h.now, ID: c.ID, Code: api.CodeTokenExpired})
	split := all[Commit](acts)
	if len(split) != 2 {
		t.Fatalf("after token_expired: %s, want one commit per partition", describe(acts))
	}
	h.step(CommitDone{Now: h.now, ID: split[0].ID})
	r := one[CommitResult](t, h.step(CommitDone{Now: h.now, ID: split[1].ID, Code: api.CodeTokenExpired}))
	if r.Code != api.CodeTokenExpired {
		t.Fatalf("result %+v, want token_expired reported", r)
	}
	if h.s.parts[pA].committed != 5 || h.s.parts[pB].committed != 0 {
		t.Fatalf("committed A %d B %d", h.s.parts[pA].committed, h.s.parts[pB].committed)
	}
}
