package session

import (
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// TestSplitCommitsInFlightAreBounded: a member holding 1,200 partitions
// commits them all in the background (3 chunks); the coordinator refuses
// each chunk token_expired (the capabilities ran out while a standby
// took over), so each partition goes again alone. At most
// MaxSplitCommitsInFlight of those are out at once, each partition is
// sent alone exactly once, and the request is answered once, after the
// last, with the first failure. Before, the refused chunks split into
// 1,200 requests at once (a connection each: 1,732 commits in flight
// at a new leader for a member of 2,000 partitions).
func TestSplitCommitsInFlightAreBounded(t *testing.T) {
	h := newHarness(t)
	const n = 1200
	grants := make([]api.Grant, n)
	for i := range grants {
		grants[i] = grant(Partition{"orders", int32(i)}, 1, 0, fmt.Sprintf("cap-%d", i), h.now.Add(time.Minute))
	}
	for _, f := range all[Fetch](h.join(grants...)) {
		h.complete(f, 1)
	}
	h.poll() // PollMaxRecords (1,000) per poll
	h.poll()
	inFlight := map[uint64]Commit{}
	var order []uint64
	var results []CommitResult
	peak, singles := 0, 0 // commits of one partition in flight
	take := func(acts []Action) {
		for _, c := range all[Commit](acts) {
			inFlight[c.ID] = c
			order = append(order, c.ID)
			if len(c.Offsets) == 1 {
				singles++
				peak = max(peak, singles)
			}
		}
		results = append(results, all[CommitResult](acts)...)
	}
	take(h.step(CommitRequested{Now: h.now, Ticket: 9, Async: true}))
	if len(inFlight) != 3 {
		t.Fatalf("%d commits for %d partitions, want 3 chunks", len(inFlight), n)
	}
	alone := map[int32]int{}
	for len(order) > 0 {
		id := order[0]
		order = order[1:]
		c := inFlight[id]
		delete(inFlight, id)
		if len(c.Offsets) == 1 {
			alone[c.Offsets[0].Partition]++
			singles--
		}
		code := api.Code("")
		if len(c.Offsets) > 1 || c.Offsets[0].Partition%2 == 0 {
			code = api.CodeTokenExpired
		}
		take(h.step(CommitDone{Now: h.now, ID: id, Code: code}))
	}
	if peak > MaxSplitCommitsInFlight {
		t.Errorf("%d commits of one partition in flight at once, want at most %d", peak, MaxSplitCommitsInFlight)
	}
	if len(alone) != n {
		t.Errorf("%d partitions sent alone, want %d", len(alone), n)
	}
	for p, k := range alone {
		if k != 1 {
			t.Errorf("partition %d sent alone %d times", p, k)
		}
	}
	if len(results) != 1 || results[0].Ticket != 9 || results[0].Code != api.CodeTokenExpired {
		t.Errorf("answers %+v, want one for ticket 9: token_expired", results)
	}
	committed := 0
	for _, p := range h.s.parts {
		if p.committed == 1 {
			committed++
		}
	}
	if committed != n/2 {
		t.Errorf("%d partitions committed, want %d (the odd ones)", committed, n/2)
	}
	t.Logf("peak %d commits of one partition in flight; %d partitions sent alone", peak, len(alone))
}
