package session

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// TestCommitIsChunked: a commit naming more partitions than
// MaxCommitPartitions goes out as several requests under one ticket, and
// the user's commit is answered once, after all of them.
func TestCommitIsChunked(t *testing.T) {
	h := newHarness(t)
	n := MaxCommitPartitions*2 + 7
	grants := make([]api.Grant, n)
	for i := range grants {
		grants[i] = grant(Partition{"orders", int32(i)}, 1, 0, "cap", h.now.Add(time.Minute))
	}
	var fetches []Fetch
	for _, a := range h.join(grants...) {
		if f, ok := a.(Fetch); ok {
			fetches = append(fetches, f)
		}
	}
	for _, f := range fetches {
		h.complete(f, 1)
	}
	h.poll() // PollMaxRecords (1,000) per poll
	h.poll()
	acts := h.step(CommitRequested{Now: h.now, Ticket: 9})
	commits := all[Commit](acts)
	total := 0
	for _, c := range commits {
		if len(c.Offsets) > MaxCommitPartitions || c.Ticket != 9 {
			t.Fatalf("commit of %d partitions, ticket %d", len(c.Offsets), c.Ticket)
		}
		total += len(c.Offsets)
	}
	if len(commits) != 3 || total != n {
		t.Fatalf("%d commits covering %d partitions, want 3 covering %d", len(commits), total, n)
	}
	for i, c := range commits {
		acts = h.step(CommitDone{Now: h.now, ID: c.ID})
		results := all[CommitResult](acts)
		if i < len(commits)-1 && len(results) != 0 {
			t.Fatalf("ticket answered after %d of %d chunks", i+1, len(commits))
		}
		if i == len(commits)-1 && (len(results) != 1 || results[0].Ticket != 9 || results[0].Code != "") {
			t.Fatalf("final answer %+v", results)
		}
	}
}
