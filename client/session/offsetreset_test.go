package session

import (
	"testing"
	"time"
)

// TestOffsetResetAppliesOnlyWithoutACommit: a consumer's own OffsetReset
// replaces the grant's start only where the group has nothing committed
// (the grant names the group's policy): earliest → the -2 sentinel,
// latest → -1, which the gateway resolves at the first fetch. A committed
// offset (no OffsetReset on the grant) and a grant under the same policy
// keep the grant's offset.
func TestOffsetResetAppliesOnlyWithoutACommit(t *testing.T) {
	cases := []struct {
		name, consumer, group string
		offset, want          int64
	}{
		{"latest over the group's earliest", OffsetResetLatest, "earliest", 0, -1},
		{"earliest over the group's latest", OffsetResetEarliest, "latest", 70, -2},
		{"committed offset wins over latest", OffsetResetLatest, "", 5, 5},
		{"committed offset wins over earliest", OffsetResetEarliest, "", 5, 5},
		{"same policy: the coordinator's offset", OffsetResetLatest, "latest", 70, 70},
		{"no policy of its own: the group's", "", "earliest", 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.OffsetReset = c.consumer
			h := &harness{t: t, s: New(cfg), now: t0}
			g := grant(pA, 1, c.offset, "cap-a", h.now.Add(time.Minute))
			g.OffsetReset = c.group
			if f := one[Fetch](t, h.join(g)); f.Offset != c.want {
				t.Fatalf("first fetch at %d, want %d", f.Offset, c.want)
			}
		})
	}
}

// TestResolvedStartIsCommitted: a partition started at a sentinel whose
// first answer has no record learns its position from the answer's next
// offset; even with ManualMarks (nothing marked), the next commit carries
// that position, so the group resumes there — as a Kafka consumer commits
// the position auto.offset.reset chose — and the next fetch reads from it.
func TestResolvedStartIsCommitted(t *testing.T) {
	cfg := testConfig()
	cfg.ManualMarks, cfg.OffsetReset = true, OffsetResetLatest
	h := &harness{t: t, s: New(cfg), now: t0}
	g := grant(pA, 1, 0, "cap-a", h.now.Add(time.Minute))
	g.OffsetReset = "earliest"
	f := one[Fetch](t, h.join(g))
	acts := h.step(FetchDone{Now: h.now, ID: f.ID, Partition: pA, Next: 40, Earliest: -1, Latest: -1})
	if next := one[Fetch](t, acts); next.Offset != 40 {
		t.Fatalf("next fetch at %d, want the resolved 40", next.Offset)
	}
	c := one[Commit](t, h.step(CommitRequested{Now: h.now, Ticket: 1}))
	if len(c.Offsets) != 1 || c.Offsets[0].Offset != 40 {
		t.Fatalf("commit %+v, want demo/0 at the resolved 40", c.Offsets)
	}
}
