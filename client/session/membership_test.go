package session

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

func TestCommitRequestedCommitsProcessed(t *testing.T) {
	h := newHarness(t)
	acts := h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute)), grant(pB, 2, 7, "capB", t0.Add(time.Minute)))
	if r := one[CommitResult](t, h.step(CommitRequested{Now: h.now, Ticket: 1})); r.Ticket != 1 || r.Code != "" {
		t.Fatalf("empty commit result %+v", r)
	}
	h.complete(all[Fetch](acts)[0], 3)
	h.poll()
	acts = h.step(CommitRequested{Now: h.now, Ticket: 2})
	c := one[Commit](t, acts)
	want := []api.CommitOffset{{Topic: "orders", Partition: 0, Offset: 3, Capability: "capA"}}
	if c.Release || c.Ticket != 2 || !slices.Equal(c.Offsets, want) {
		t.Fatalf("commit %+v, want A at 3 (B did not move)", c)
	}
	none[CommitResult](t, acts)
	if r := one[CommitResult](t, h.step(CommitDone{Now: h.now, ID: c.ID})); r.Ticket != 2 || r.Code != "" {
		t.Fatalf("result %+v", r)
	}
	if p := h.s.parts[pA]; p.committed != 3 {
		t.Fatalf("committed %d", p.committed)
	}
	none[Commit](t, h.step(CommitRequested{Now: h.now, Ticket: 3}))
}

func TestCommitFailureReported(t *testing.T) {
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute))))
	h.complete(f, 3)
	h.poll()
	c := one[Commit](t, h.step(CommitRequested{Now: h.now, Ticket: 1}))
	boom := errors.New("boom")
	r := one[CommitResult](t, h.step(CommitDone{Now: h.now, ID: c.ID, Code: api.CodeUnavailable, Err: boom}))
	if r.Code != api.CodeUnavailable || r.Err != boom {
		t.Fatalf("result %+v", r)
	}
	if p := h.s.parts[pA]; p.committed != 0 {
		t.Fatalf("committed %d after a failure", p.committed)
	}
}

func TestCommitSplitsOnStaleEpoch(t *testing.T) {
	h := newHarness(t)
	acts := h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute)), grant(pB, 1, 0, "capB", t0.Add(time.Minute)))
	for _, f := range all[Fetch](acts) {
		h.complete(f, 2)
	}
	h.poll()
	c := one[Commit](t, h.step(CommitRequested{Now: h.now, Ticket: 9}))
	acts = h.step(CommitDone{Now: h.now, ID: c.ID, Code: api.CodeStaleEpoch})
	none[CommitResult](t, acts)
	split := all[Commit](acts)
	if len(split) != 2 || len(split[0].Offsets) != 1 || len(split[1].Offsets) != 1 || split[0].Ticket != 9 {
		t.Fatalf("split into %s", describe(acts))
	}
	none[CommitResult](t, h.step(CommitDone{Now: h.now, ID: split[0].ID}))
	r := one[CommitResult](t, h.step(CommitDone{Now: h.now, ID: split[1].ID, Code: api.CodeStaleEpoch}))
	if r.Code != api.CodeStaleEpoch {
		t.Fatalf("result %+v, want the single stale partition's code", r)
	}
	if a, b := h.s.parts[pA].committed, h.s.parts[pB].committed; a != 2 || b != 0 {
		t.Fatalf("committed A %d B %d, want 2 and 0", a, b)
	}
}

func TestMemberLostDropsAllAndRejoins(t *testing.T) {
	h := newHarness(t)
	acts := h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute)), grant(pB, 1, 0, "capB", t0.Add(time.Minute)))
	fa := all[Fetch](acts)[0]
	h.complete(all[Fetch](acts)[1], 4)
	inc := h.s.Member().Incarnation
	acts = h.step(HeartbeatFailed{Now: h.now, Incarnation: inc, Code: api.CodeUnknownMember})
	hook := one[CallRevoke](t, acts)
	if !hook.Lost || !slices.Equal(hook.Partitions, []Partition{pA, pB}) {
		t.Fatalf("lost hook %+v", hook)
	}
	if len(all[CancelFetch](acts)) != 2 {
		t.Fatalf("want both fetches cancelled: %s", describe(acts))
	}
	none[Commit](t, acts)
	one[Rejoin](t, acts)
	if n, _ := h.s.Buffered(); n != 0 || h.s.Status() != Rejoining {
		t.Fatalf("buffered %d status %s", n, h.s.Status())
	}
	// A second failure while rejoining asks nothing more.
	none[Rejoin](t, h.step(HeartbeatFailed{Now: h.now, Incarnation: inc, Code: api.CodeUnknownMember}))
	acts = h.join(grant(pA, 4, 0, "capA4", t0.Add(time.Minute)))
	if f := one[Fetch](t, acts); f.Epoch != 4 {
		t.Fatalf("fetch %+v", f)
	}
	if m := h.s.Member(); m.Incarnation != inc+1 {
		t.Fatalf("incarnation %d", m.Incarnation)
	}
	// Results of the old incarnation change nothing.
	none[Rejoin](t, h.step(HeartbeatFailed{Now: h.now, Incarnation: inc, Code: api.CodeUnknownMember}))
	none[CallGrant](t, h.step(NewsArrived{Now: h.now, Incarnation: inc, News: api.HeartbeatResponse{
		Grants: []api.Grant{grant(pB, 9, 0, "capB9", t0.Add(time.Minute))},
	}}))
	none[Deliver](t, h.complete(fa, 3))
	if h.s.Status() != Active {
		t.Fatalf("status %s", h.s.Status())
	}
}

func TestCommitUnknownMemberRejoins(t *testing.T) {
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute))))
	h.complete(f, 2)
	h.poll()
	c := one[Commit](t, h.step(CommitRequested{Now: h.now, Ticket: 1}))
	acts := h.step(CommitDone{Now: h.now, ID: c.ID, Code: api.CodeUnknownMember})
	one[Rejoin](t, acts)
	if r := one[CommitResult](t, acts); r.Code != api.CodeUnknownMember {
		t.Fatalf("result %+v", r)
	}
}

func TestHeartbeatFailureOtherCodesChangeNothing(t *testing.T) {
	h := newHarness(t)
	h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute)))
	acts := h.step(HeartbeatFailed{Now: h.now, Incarnation: 1, Code: api.CodeUnavailable})
	if len(acts) != 0 {
		t.Fatalf("actions %s", describe(acts))
	}
}

func TestCloseReleasesThenLeavesThenStops(t *testing.T) {
	h := newHarness(t)
	acts := h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute)), grant(pB, 1, 0, "capB", t0.Add(time.Minute)))
	fetches := all[Fetch](acts)
	fa := one[Fetch](t, h.complete(fetches[0], 3))
	h.poll() // 0..2 of A handed out; Close counts them as processed
	acts = h.step(CloseRequested{Now: h.now})
	hook := one[CallRevoke](t, acts)
	if !slices.Equal(hook.Partitions, []Partition{pA, pB}) {
		t.Fatalf("close hook %+v", hook)
	}
	if len(all[CancelFetch](acts)) != 2 {
		t.Fatalf("cancel: %s", describe(acts))
	}
	h.step(FetchDone{Now: h.now, ID: fa.ID, Partition: pA, Canceled: true})
	h.step(FetchDone{Now: h.now, ID: fetches[1].ID, Partition: pB, Canceled: true})
	c := one[Commit](t, h.step(HookDone{Now: h.now, ID: hook.ID}))
	want := []api.CommitOffset{
		{Topic: "orders", Partition: 0, Offset: 3, Capability: "capA"},
		{Topic: "orders", Partition: 1, Offset: 0, Capability: "capB"},
	}
	if !c.Release || !slices.Equal(c.Offsets, want) {
		t.Fatalf("final commit %+v", c)
	}
	// News while closing grants nothing new.
	none[CallGrant](t, h.news(api.HeartbeatResponse{Grants: []api.Grant{grant(Partition{"x", 0}, 1, 0, "c", t0.Add(time.Minute))}}))
	leave := one[Leave](t, h.step(CommitDone{Now: h.now, ID: c.ID}))
	if leave.Token != "member-token" || h.s.Status() != Leaving {
		t.Fatalf("leave %+v status %s", leave, h.s.Status())
	}
	one[Stop](t, h.step(LeaveDone{Now: h.now}))
	if h.s.Status() != Stopped {
		t.Fatalf("status %s", h.s.Status())
	}
	if got := h.poll(); len(got) != 0 {
		t.Fatalf("delivered after stop")
	}
}

func TestCloseBeforeJoinOrWhileRejoiningStops(t *testing.T) {
	h := newHarness(t)
	one[Stop](t, h.step(CloseRequested{Now: h.now}))

	h = newHarness(t)
	h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute)))
	h.step(HeartbeatFailed{Now: h.now, Incarnation: 1, Code: api.CodeUnknownMember})
	one[Stop](t, h.step(CloseRequested{Now: h.now}))
	none[Fetch](t, h.join(grant(pA, 2, 0, "capA", t0.Add(time.Minute))))
}

func TestConfigValidate(t *testing.T) {
	good := testConfig()
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(*Config){
		func(c *Config) { c.BufferMaxBytes = 0 },
		func(c *Config) { c.PollMaxRecords = 0 },
		func(c *Config) { c.RevokeTimeout = 0 },
		func(c *Config) { c.ExpiryMargin = -1 },
		func(c *Config) { c.FetchMaxBytes = -1 },
	}
	for i, mutate := range bad {
		c := good
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("case %d: no error", i)
		}
	}
}
