package session

import (
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

func TestJoinedStartsFetchAtGrantOffset(t *testing.T) {
	h := newHarness(t)
	exp := t0.Add(time.Minute)
	acts := h.join(grant(pB, 7, 40, "capB", exp), grant(pA, 3, 10, "capA", exp))
	fetches := all[Fetch](acts)
	if len(fetches) != 2 {
		t.Fatalf("want 2 fetches, got %s", describe(acts))
	}
	for i := range fetches { // the capability's expiry, for the shell's retries
		if !fetches[i].ExpiresAt.Equal(exp) {
			t.Fatalf("fetch %d carries expiry %s, want %s", i, fetches[i].ExpiresAt, exp)
		}
		fetches[i].ExpiresAt = time.Time{}
	}
	want := []Fetch{
		{ID: fetches[0].ID, Partition: pA, Epoch: 3, Offset: 10, Capability: "capA"},
		{ID: fetches[1].ID, Partition: pB, Epoch: 7, Offset: 40, Capability: "capB"},
	}
	if !slices.Equal(fetches, want) {
		t.Fatalf("fetches = %+v, want %+v (sorted by partition)", fetches, want)
	}
	if g := one[CallGrant](t, acts); !slices.Equal(g.Partitions, []Partition{pA, pB}) {
		t.Fatalf("grant hook for %v", g.Partitions)
	}
	if st := h.s.Status(); st != Active {
		t.Fatalf("status %s, want active", st)
	}
	if m := h.s.Member(); m.ID != "m1" || m.Token != "member-token" || m.Incarnation != 1 {
		t.Fatalf("member %+v", m)
	}
}

func TestFetchDoneQueuesBatchAndFetchesOn(t *testing.T) {
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "cap", t0.Add(time.Minute))))
	acts := h.complete(f, 5)
	next := one[Fetch](t, acts)
	if next.Offset != 5 || next.ID == f.ID || next.Capability != "cap" {
		t.Fatalf("next fetch %+v, want offset 5 with a new id", next)
	}
	if n, b := h.s.Buffered(); n != 5 || b != 50 {
		t.Fatalf("buffered %d records %d bytes, want 5/50", n, b)
	}
}

func TestPolledDeliversInOrderAndAcksOnNextPoll(t *testing.T) {
	h := newHarness(t)
	acts := h.join(grant(pA, 1, 0, "capA", t0.Add(time.Minute)), grant(pB, 1, 100, "capB", t0.Add(time.Minute)))
	fetches := all[Fetch](acts)
	fa := one[Fetch](t, h.complete(fetches[0], 3))
	h.complete(fetches[1], 2)
	h.complete(fa, 2)

	batches := h.poll()
	if got := offsetsOf(batches, pA); !slices.Equal(got, []int64{0, 1, 2, 3, 4}) {
		t.Fatalf("partition A delivered %v", got)
	}
	if got := offsetsOf(batches, pB); !slices.Equal(got, []int64{100, 101}) {
		t.Fatalf("partition B delivered %v", got)
	}
	info, _ := h.s.Inspect(pA)
	if info.Delivered != 5 || info.Processed != 0 || info.Next != 5 || info.State != Fetching {
		t.Fatalf("after first poll %+v, want delivered 5 processed 0", info)
	}
	if got := h.poll(); len(got) != 0 {
		t.Fatalf("second poll delivered %d batches, want none", len(got))
	}
	if info, _ = h.s.Inspect(pA); info.Processed != 5 {
		t.Fatalf("second poll: processed %d, want 5", info.Processed)
	}
	if _, held := h.s.Inspect(Partition{"other", 0}); held {
		t.Fatalf("unknown partition reported held")
	}
}

func TestPolledDeliversWholeBatchesUpToMax(t *testing.T) {
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "cap", t0.Add(time.Minute))))
	f = one[Fetch](t, h.complete(f, 3))
	f = one[Fetch](t, h.complete(f, 3))
	h.complete(f, 3)
	acts := h.step(Polled{Now: h.now, MaxRecords: 4})
	if got := offsetsOf(one[Deliver](t, acts).Batches, pA); !slices.Equal(got, []int64{0, 1, 2}) {
		t.Fatalf("max 4 delivered %v, want the first batch only", got)
	}
	acts = h.step(Polled{Now: h.now, MaxRecords: 1})
	if got := offsetsOf(one[Deliver](t, acts).Batches, pA); !slices.Equal(got, []int64{3, 4, 5}) {
		t.Fatalf("max 1 delivered %v, want one whole batch", got)
	}
}

func TestEmptyBatchMovesDeliveredOffset(t *testing.T) {
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "cap", t0.Add(time.Minute))))
	f = one[Fetch](t, h.complete(f, 2))
	// Offsets 2..4 are control records: nothing to deliver, next is 5.
	acts := h.step(FetchDone{Now: h.now, ID: f.ID, Partition: pA, Next: 5})
	if next := one[Fetch](t, acts); next.Offset != 5 {
		t.Fatalf("fetch after empty batch at %d, want 5", next.Offset)
	}
	if got := offsetsOf(h.poll(), pA); !slices.Equal(got, []int64{0, 1}) {
		t.Fatalf("delivered %v", got)
	}
	h.poll()
	if p := h.s.parts[pA]; p.processed != 5 {
		t.Fatalf("processed %d, want 5 (past the control records)", p.processed)
	}
}

func TestBufferBoundPausesFetching(t *testing.T) {
	h := newHarness(t)
	h.s.cfg.BufferMaxBytes = 100
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "cap", t0.Add(time.Minute))))
	f = one[Fetch](t, h.complete(f, 6)) // 60 bytes
	none[Fetch](t, h.complete(f, 6))    // 120 bytes: full
	acts := h.step(Polled{Now: h.now})
	if next := one[Fetch](t, acts); next.Offset != 12 {
		t.Fatalf("fetch after drain at %d, want 12", next.Offset)
	}
}

func TestRenewalKeepsOffsetAndReplacesCapability(t *testing.T) {
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 4, 0, "old", t0.Add(time.Minute))))
	f = one[Fetch](t, h.complete(f, 10))
	h.poll()
	h.advance(40 * time.Second)
	acts := h.news(api.HeartbeatResponse{Renew: []api.Grant{grant(pA, 4, 0, "new", h.now.Add(time.Minute))}})
	none[Fetch](t, acts) // the fetch in flight goes on
	none[CallGrant](t, acts)
	next := one[Fetch](t, h.complete(f, 5))
	if next.Offset != 15 || next.Capability != "new" || next.Epoch != 4 {
		t.Fatalf("after renewal fetch %+v, want offset 15 with the new capability", next)
	}
	p := h.s.parts[pA]
	if p.delivered != 10 || p.committed != 0 {
		t.Fatalf("renewal touched offsets: delivered %d committed %d", p.delivered, p.committed)
	}
	// A grant naming the held epoch is a renewal too, even with another offset.
	h.news(api.HeartbeatResponse{Grants: []api.Grant{grant(pA, 4, 0, "newer", h.now.Add(time.Minute))}})
	if p.next != 15 || p.capability != "newer" {
		t.Fatalf("same-epoch grant: next %d capability %q", p.next, p.capability)
	}
}

func TestRefusedCapabilityPausesUntilNewCapability(t *testing.T) {
	for _, code := range []api.Code{api.CodeTokenExpired, api.CodeUnauthorized, api.CodeForbidden, api.CodeNotFound} {
		t.Run(string(code), func(t *testing.T) {
			h := newHarness(t)
			f := one[Fetch](t, h.join(grant(pA, 1, 0, "cap", t0.Add(time.Minute))))
			f = one[Fetch](t, h.complete(f, 3))
			none[Fetch](t, h.fail(f, code))
			acts := h.news(api.HeartbeatResponse{Renew: []api.Grant{grant(pA, 1, 0, "fresh", t0.Add(2*time.Minute))}})
			if next := one[Fetch](t, acts); next.Offset != 3 || next.Capability != "fresh" {
				t.Fatalf("after renewal %+v", next)
			}
		})
	}
}

func TestExpiringCapabilityStopsFetching(t *testing.T) {
	h := newHarness(t)
	exp := t0.Add(10 * time.Second)
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "cap", exp)))
	h.now = exp.Add(-h.s.cfg.ExpiryMargin) // inside the margin
	none[Fetch](t, h.complete(f, 1))
	acts := h.news(api.HeartbeatResponse{Renew: []api.Grant{grant(pA, 1, 0, "renewed", exp.Add(time.Minute))}})
	if next := one[Fetch](t, acts); next.Offset != 1 || next.Capability != "renewed" {
		t.Fatalf("after renewal %+v", next)
	}
}

func TestOffsetOutOfRangeMovesToEarliest(t *testing.T) {
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 1, 5, "cap", t0.Add(time.Minute))))
	acts := h.step(FetchDone{Now: h.now, ID: f.ID, Partition: pA, Code: api.CodeOffsetOutOfRange, Earliest: 50, Latest: 80})
	if next := one[Fetch](t, acts); next.Offset != 50 {
		t.Fatalf("fetch at %d, want earliest 50", next.Offset)
	}
	if p := h.s.parts[pA]; p.processed != 50 {
		t.Fatalf("processed %d, want 50 (nothing lies before earliest)", p.processed)
	}
	// Unknown bounds: stop rather than loop.
	f = all[Fetch](acts)[0]
	none[Fetch](t, h.fail(f, api.CodeOffsetOutOfRange))
}

func TestHeartbeatWaitBoundByHalfLease(t *testing.T) {
	h := newHarness(t)
	limit := 3 * time.Second
	if w := h.s.HeartbeatWait(h.now, limit); w != limit {
		t.Fatalf("no partitions: wait %s, want %s", w, limit)
	}
	h.join(grant(pA, 1, 0, "cap", t0.Add(4*time.Second)))
	if w := h.s.HeartbeatWait(h.now, limit); w != 2*time.Second {
		t.Fatalf("lease 4s: wait %s, want 2s (half the lease)", w)
	}
	h.advance(3 * time.Second) // past half: the next heartbeat renews it
	if w := h.s.HeartbeatWait(h.now, limit); w != limit {
		t.Fatalf("past half lease: wait %s, want %s", w, limit)
	}
	if w := h.s.HeartbeatWait(h.now, time.Microsecond); w != time.Millisecond {
		t.Fatalf("floor: wait %s, want 1ms", w)
	}
}

// TestFetchSizeIsTheBuffersShare: with FetchMaxBytes set, a fetch asks
// for its partition's share of the buffer (BufferMaxBytes over two
// fetches per fetching partition), never below the 1 MiB floor nor above
// FetchMaxBytes; a FetchMaxBytes below the floor is the size; none set
// asks for no size.
func TestFetchSizeIsTheBuffersShare(t *testing.T) {
	exp := t0.Add(time.Minute)
	grants := func(n int) []api.Grant {
		var gs []api.Grant
		for i := range n {
			gs = append(gs, grant(Partition{"orders", int32(i)}, 1, 0, "cap", exp))
		}
		return gs
	}
	cases := []struct {
		buffer   int64
		max      int32
		parts    int
		want     int32
		overshot bool // the fetches may together pass the buffer (the floor rules)
	}{
		{16 << 20, 4 << 20, 1, 4 << 20, false},        // share 8 MiB, capped
		{16 << 20, 4 << 20, 3, (16 << 20) / 6, false}, // share 2.67 MiB
		{16 << 20, 4 << 20, 8, 1 << 20, false},        // share 1 MiB
		{16 << 20, 4 << 20, 20, 1 << 20, true},        // share 0.4 MiB: the floor
		{16 << 20, 64 << 10, 3, 64 << 10, false},      // below the floor: the size
		{16 << 20, 0, 3, 0, false},                    // no size set
	}
	for _, tc := range cases {
		cfg := testConfig()
		cfg.BufferMaxBytes, cfg.FetchMaxBytes = tc.buffer, tc.max
		h := &harness{t: t, s: New(cfg), now: t0}
		fetches := all[Fetch](h.join(grants(tc.parts)...))
		if len(fetches) != tc.parts {
			t.Fatalf("%+v: %d fetches", tc, len(fetches))
		}
		for _, f := range fetches {
			if f.MaxBytes != tc.want {
				t.Fatalf("%+v: fetch of %v asks %d bytes, want %d", tc, f.Partition, f.MaxBytes, tc.want)
			}
		}
		// Two fetches per partition (one fetched ahead) stay within the
		// buffer unless the floor rules.
		if total := 2 * int64(tc.parts) * int64(tc.want); total > tc.buffer && !tc.overshot {
			t.Fatalf("%+v: %d bytes in flight at most, over the buffer's %d", tc, total, tc.buffer)
		}
	}
}
