package session

import (
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// TestReleasesInFlightAreBounded: a member holding 100 partitions, each
// with a fetch in flight, is revoked them all; the fetches end one by
// one, each leaving its partition ready to release. At most
// MaxReleasesInFlight releases are out at once (the partitions ready
// meanwhile go together in the next); the coordinator refuses a release
// of several (capability_revoked: the member was revoked, every
// capability fenced), and its partitions go again alone, as many at a
// time. Every partition is released and given up in the end. Before,
// each fetch's end sent its own release at once, and a refused release
// split into one request per partition at once: ~100 requests in flight
// here, ~1,000 connections for a member of 1,000 partitions (past the
// coordinator's max_connections_per_address, which refused every client
// of that address).
func TestReleasesInFlightAreBounded(t *testing.T) {
	h := newHarness(t)
	var grants []api.Grant
	var revoke []api.PartitionRef
	for i := range 100 {
		p := Partition{"orders", int32(i)}
		grants = append(grants, grant(p, 1, 0, fmt.Sprintf("cap-%d", i), h.now.Add(time.Minute)))
		revoke = append(revoke, api.PartitionRef{Topic: p.Topic, Partition: p.Partition, Epoch: 1})
	}
	fetches := all[Fetch](h.join(grants...))
	if len(fetches) != 100 {
		t.Fatalf("%d fetches at the join, want 100", len(fetches))
	}
	inFlight := map[uint64]Commit{}
	released := map[Partition]int{}
	peak := 0
	var take func(acts []Action)
	take = func(acts []Action) {
		t.Helper()
		for _, c := range all[Commit](acts) {
			if !c.Release {
				continue
			}
			inFlight[c.ID] = c
			peak = max(peak, len(inFlight))
		}
		for _, hook := range all[CallRevoke](acts) {
			take(h.step(HookDone{Now: h.now, ID: hook.ID}))
		}
	}
	take(h.news(api.HeartbeatResponse{Revoke: revoke}))
	refused := false
	for i, f := range fetches {
		take(h.complete(f, 0))
		// The coordinator answers the oldest release after every fourth
		// fetch's end: the first of several partitions it refuses, the
		// rest it takes.
		if i%4 == 3 && len(inFlight) > 0 {
			var oldest Commit
			for _, c := range inFlight {
				if oldest.ID == 0 || c.ID < oldest.ID {
					oldest = c
				}
			}
			delete(inFlight, oldest.ID)
			code := api.Code("")
			if len(oldest.Offsets) > 1 && !refused {
				code, refused = api.CodeCapabilityRevoked, true
			} else {
				for _, o := range oldest.Offsets {
					released[Partition{o.Topic, o.Partition}]++
				}
			}
			take(h.step(CommitDone{Now: h.now, ID: oldest.ID, Code: code}))
		}
	}
	for len(inFlight) > 0 {
		for id, c := range inFlight {
			delete(inFlight, id)
			for _, o := range c.Offsets {
				released[Partition{o.Topic, o.Partition}]++
			}
			take(h.step(CommitDone{Now: h.now, ID: id}))
			break
		}
	}
	if peak > MaxReleasesInFlight {
		t.Errorf("%d releases in flight at once, want at most %d", peak, MaxReleasesInFlight)
	}
	if !refused {
		t.Error("no release of several partitions was refused: the split was not exercised")
	}
	if len(released) != 100 {
		t.Errorf("%d partitions released, want 100", len(released))
	}
	if a := h.s.Assigned(); len(a) != 0 {
		t.Errorf("still assigned after every release: %v", a)
	}
	t.Logf("peak %d releases in flight; %d partitions released", peak, len(released))
}
