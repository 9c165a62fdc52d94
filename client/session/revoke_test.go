package session

import (
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// TestRevokeMidFetchLosesNothingDuplicatesNothing: a revoke arrives while a
// fetch is in flight and records are buffered. Nothing more is delivered,
// the committed offset is the one after the last processed record, and a
// next holder starting there reads exactly the records not processed here.
func TestRevokeMidFetchLosesNothingDuplicatesNothing(t *testing.T) {
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 3, 0, "cap-e3", t0.Add(time.Minute))))
	f = one[Fetch](t, h.complete(f, 4))
	processed := offsetsOf(h.poll(), pA) // 0..3 handed out
	f = one[Fetch](t, h.complete(f, 4))  // 4..7 buffered, f in flight at 8

	acts := h.revoke(pA, 3)
	if c := one[CancelFetch](t, acts); c.ID != f.ID {
		t.Fatalf("cancelled %d, want the in-flight fetch %d", c.ID, f.ID)
	}
	hook := one[CallRevoke](t, acts)
	if hook.Lost || !slices.Equal(hook.Partitions, []Partition{pA}) {
		t.Fatalf("revoke hook %+v", hook)
	}
	none[Commit](t, acts) // fetch and hook still out
	if got := h.poll(); len(got) != 0 {
		t.Fatalf("delivered %d batches after the revoke", len(got))
	}
	// The late response (admitted under epoch 3) arrives with records: dropped.
	acts = h.complete(f, 4)
	none[Commit](t, acts)
	none[Fetch](t, acts)
	acts = h.step(HookDone{Now: h.now, ID: hook.ID})
	c := one[Commit](t, acts)
	want := []api.CommitOffset{{Topic: "orders", Partition: 0, Offset: 4, Capability: "cap-e3"}}
	if !c.Release || !slices.Equal(c.Offsets, want) || c.Token != "member-token" {
		t.Fatalf("release commit %+v, want offset 4 with the old capability", c)
	}
	h.step(CommitDone{Now: h.now, ID: c.ID})
	if len(h.s.parts) != 0 {
		t.Fatalf("partition still held after release")
	}
	// The next holder starts at the committed offset: 4 is the first record
	// it reads, right after the last one processed here.
	if last := processed[len(processed)-1]; last+1 != c.Offsets[0].Offset {
		t.Fatalf("processed up to %d, committed %d", last, c.Offsets[0].Offset)
	}
}

func TestRevokeWaitsForUserAcknowledgement(t *testing.T) {
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "cap", t0.Add(time.Minute))))
	h.complete(f, 5)
	h.poll() // 0..4 handed to the user, not yet processed
	acts := h.revoke(pA, 1)
	hook := one[CallRevoke](t, acts)
	h.step(FetchDone{Now: h.now, ID: f.ID + 1, Partition: pA, Canceled: true})
	none[Commit](t, h.step(HookDone{Now: h.now, ID: hook.ID}))
	if d := h.s.NextDeadline(); !d.Equal(t0.Add(h.s.cfg.RevokeTimeout)) {
		t.Fatalf("deadline %s", d)
	}
	// The user's next poll says it processed 0..4.
	acts = h.step(Polled{Now: h.now})
	if len(one[Deliver](t, acts).Batches) != 0 {
		t.Fatalf("delivered records of a revoked partition")
	}
	if c := one[Commit](t, acts); c.Offsets[0].Offset != 5 || !c.Release {
		t.Fatalf("commit %+v, want release at 5", c)
	}
}

func TestRevokeTimesOutWaitingForUser(t *testing.T) {
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "cap", t0.Add(time.Minute))))
	f = one[Fetch](t, h.complete(f, 5))
	h.poll()
	hook := one[CallRevoke](t, h.revoke(pA, 1))
	h.step(FetchDone{Now: h.now, ID: f.ID, Partition: pA, Canceled: true})
	h.step(HookDone{Now: h.now, ID: hook.ID})
	h.now = h.s.NextDeadline().Add(-time.Millisecond)
	none[Commit](t, h.step(Tick{Now: h.now}))
	h.now = h.s.NextDeadline()
	c := one[Commit](t, h.step(Tick{Now: h.now}))
	if c.Offsets[0].Offset != 0 || !c.Release {
		t.Fatalf("commit %+v, want release at the processed offset 0", c)
	}
	if d := h.s.NextDeadline(); !d.IsZero() {
		t.Fatalf("deadline %s after release was sent", d)
	}
}

func TestRevokeWaitsForCommitInFlight(t *testing.T) {
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "cap", t0.Add(time.Minute))))
	f = one[Fetch](t, h.complete(f, 5))
	h.poll()
	user := one[Commit](t, h.step(CommitRequested{Now: h.now, Ticket: 1}))
	hook := one[CallRevoke](t, h.revoke(pA, 1))
	h.step(FetchDone{Now: h.now, ID: f.ID, Partition: pA, Canceled: true})
	none[Commit](t, h.step(HookDone{Now: h.now, ID: hook.ID}))
	acts := h.step(CommitDone{Now: h.now, ID: user.ID})
	if r := one[CommitResult](t, acts); r.Ticket != 1 || r.Code != "" {
		t.Fatalf("user commit result %+v", r)
	}
	if c := one[Commit](t, acts); !c.Release || c.Offsets[0].Offset != 5 {
		t.Fatalf("release %+v", c)
	}
}

func TestRevokeIgnoresOlderEpochAndUnknownPartition(t *testing.T) {
	h := newHarness(t)
	h.join(grant(pA, 5, 0, "cap", t0.Add(time.Minute)))
	acts := h.revoke(pA, 4)
	none[CallRevoke](t, acts)
	none[CancelFetch](t, acts)
	none[CallRevoke](t, h.revoke(pB, 9))
	if st := h.s.parts[pA].state; st != Fetching {
		t.Fatalf("state %s after stale revoke", st)
	}
	// A revoke naming a later epoch than held still revokes.
	one[CallRevoke](t, h.revoke(pA, 6))
}

func TestGateway409StartsRevoke(t *testing.T) {
	h := newHarness(t)
	f := all[Fetch](h.join(grant(pA, 2, 0, "cap-e2", t0.Add(time.Minute)), grant(pB, 2, 0, "capB", t0.Add(time.Minute))))[0]
	f = one[Fetch](t, h.complete(f, 3))
	h.poll()
	h.poll()
	acts := h.fail(f, api.CodeCapabilityRevoked)
	none[Fetch](t, acts)
	hook := one[CallRevoke](t, acts)
	if !slices.Equal(hook.Partitions, []Partition{pA}) {
		t.Fatalf("hook for %v", hook.Partitions)
	}
	c := one[Commit](t, h.step(HookDone{Now: h.now, ID: hook.ID}))
	if !c.Release || c.Offsets[0].Offset != 3 || c.Offsets[0].Capability != "cap-e2" {
		t.Fatalf("release %+v", c)
	}
	// The coordinator's revoke arrives later: nothing more happens.
	acts = h.revoke(pA, 2)
	none[CallRevoke](t, acts)
	none[Commit](t, acts)
	if got := h.s.Assigned(); !slices.Equal(got, []Partition{pB}) {
		t.Fatalf("assigned %v, want only B", got)
	}
}

func TestReleaseRefusedStillReleases(t *testing.T) {
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "cap", t0.Add(time.Minute))))
	hook := one[CallRevoke](t, h.revoke(pA, 1))
	h.step(FetchDone{Now: h.now, ID: f.ID, Partition: pA, Canceled: true})
	c := one[Commit](t, h.step(HookDone{Now: h.now, ID: hook.ID}))
	h.step(CommitDone{Now: h.now, ID: c.ID, Code: api.CodeStaleEpoch})
	if len(h.s.parts) != 0 {
		t.Fatalf("partition still held after a refused release")
	}
}

func TestGrantHigherEpochReplacesEverything(t *testing.T) {
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 1, 0, "cap-e1", t0.Add(time.Minute))))
	old := one[Fetch](t, h.complete(f, 5))
	acts := h.news(api.HeartbeatResponse{Grants: []api.Grant{grant(pA, 3, 2, "cap-e3", t0.Add(time.Minute))}})
	if c := one[CancelFetch](t, acts); c.ID != old.ID {
		t.Fatalf("cancelled %d, want %d", c.ID, old.ID)
	}
	f = one[Fetch](t, acts)
	if f.Epoch != 3 || f.Offset != 2 || f.Capability != "cap-e3" {
		t.Fatalf("fetch %+v, want epoch 3 from 2", f)
	}
	one[CallGrant](t, acts)
	if n, _ := h.s.Buffered(); n != 0 {
		t.Fatalf("%d records of epoch 1 still buffered", n)
	}
	// The late answer to the epoch-1 fetch is dropped.
	acts = h.complete(old, 4)
	none[Fetch](t, acts)
	if got := h.poll(); len(got) != 0 {
		t.Fatalf("late epoch-1 records delivered")
	}
}

func TestStaleGrantIgnored(t *testing.T) {
	h := newHarness(t)
	h.join(grant(pA, 5, 0, "cap-e5", t0.Add(time.Minute)))
	acts := h.news(api.HeartbeatResponse{
		Grants: []api.Grant{grant(pA, 4, 99, "cap-e4", t0.Add(time.Hour))},
		Renew:  []api.Grant{grant(pA, 3, 99, "cap-e3", t0.Add(time.Hour))},
	})
	none[CallGrant](t, acts)
	none[Fetch](t, acts)
	if p := h.s.parts[pA]; p.capability != "cap-e5" || p.next != 0 {
		t.Fatalf("stale grant applied: %q at %d", p.capability, p.next)
	}
	// After a release, the released epoch (or an older one) is not taken back.
	f := h.s.parts[pA].fetch
	hook := one[CallRevoke](t, h.revoke(pA, 5))
	h.step(FetchDone{Now: h.now, ID: f, Partition: pA, Canceled: true})
	c := one[Commit](t, h.step(HookDone{Now: h.now, ID: hook.ID}))
	h.step(CommitDone{Now: h.now, ID: c.ID})
	acts = h.news(api.HeartbeatResponse{Renew: []api.Grant{grant(pA, 5, 0, "cap-e5b", t0.Add(time.Hour))}})
	none[CallGrant](t, acts)
	none[Fetch](t, acts)
	// A fresh epoch is a new grant.
	acts = h.news(api.HeartbeatResponse{Grants: []api.Grant{grant(pA, 7, 0, "cap-e7", t0.Add(time.Hour))}})
	if f := one[Fetch](t, acts); f.Epoch != 7 {
		t.Fatalf("fetch %+v", f)
	}
}

func TestLateFetchAfterRevokeAndRegrantDropped(t *testing.T) {
	h := newHarness(t)
	old := one[Fetch](t, h.join(grant(pA, 1, 0, "cap-e1", t0.Add(time.Minute))))
	hook := one[CallRevoke](t, h.revoke(pA, 1))
	// Handoff times out at the coordinator; the partition comes back at epoch 3.
	acts := h.news(api.HeartbeatResponse{Grants: []api.Grant{grant(pA, 3, 0, "cap-e3", t0.Add(time.Minute))}})
	f := one[Fetch](t, acts)
	h.step(HookDone{Now: h.now, ID: hook.ID})
	none[Commit](t, h.complete(old, 6)) // epoch-1 answer arrives late
	h.complete(f, 2)
	if got := offsetsOf(h.poll(), pA); !slices.Equal(got, []int64{0, 1}) {
		t.Fatalf("delivered %v, want only the epoch-3 records", got)
	}
}

func TestRevokeAndRegrantInOneNews(t *testing.T) {
	h := newHarness(t)
	h.join(grant(pA, 1, 0, "cap-e1", t0.Add(time.Minute)))
	acts := h.news(api.HeartbeatResponse{
		Revoke: []api.PartitionRef{{Topic: "orders", Partition: 0, Epoch: 1}},
		Grants: []api.Grant{grant(pA, 2, 0, "cap-e2", t0.Add(time.Minute))},
	})
	var order []string
	for _, a := range acts {
		switch a.(type) {
		case CallRevoke:
			order = append(order, "revoke")
		case CallGrant:
			order = append(order, "grant")
		}
	}
	if !slices.Equal(order, []string{"revoke", "grant"}) {
		t.Fatalf("hooks in order %v, want revoke then grant", order)
	}
	if f := one[Fetch](t, acts); f.Epoch != 2 {
		t.Fatalf("fetch %+v", f)
	}
}
