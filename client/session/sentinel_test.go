package session

import (
	"testing"
	"time"
)

// TestGrantAtOffsetSentinel: a grant whose start offset the coordinator
// could not resolve carries Kafka's sentinel (-2 earliest, -1 latest). The
// session fetches at the sentinel (the shell sends offset=earliest|latest,
// the gateway resolves it) and continues from the concrete next offset
// the gateway answers; a commit never carries the sentinel.
func TestGrantAtOffsetSentinel(t *testing.T) {
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 1, -2, "cap-a", h.now.Add(time.Minute))))
	if f.Offset != -2 {
		t.Fatalf("first fetch at %d, want the sentinel -2", f.Offset)
	}
	// The gateway resolved earliest to 40 and returned 40..42.
	acts := h.step(FetchDone{Now: h.now, ID: f.ID, Partition: pA, Records: 3, Bytes: 30, Next: 43, Payload: []int64{40, 41, 42}})
	next := one[Fetch](t, acts)
	if next.Offset != 43 {
		t.Fatalf("second fetch at %d, want 43", next.Offset)
	}
	if got := offsetsOf(h.poll(), pA); len(got) != 3 || got[0] != 40 {
		t.Fatalf("delivered %v", got)
	}
	acts = h.revoke(pA, 1)
	hook := one[CallRevoke](t, acts)
	acts = append(acts, h.step(FetchDone{Now: h.now, ID: next.ID, Partition: pA, Canceled: true})...)
	acts = append(acts, h.step(Polled{Now: h.now})...)
	for _, a := range append(acts, h.step(HookDone{Now: h.now, ID: hook.ID})...) {
		if c, ok := a.(Commit); ok {
			for _, o := range c.Offsets {
				if o.Offset != 43 {
					t.Fatalf("release commits %d, want 43", o.Offset)
				}
			}
			return
		}
	}
	t.Fatal("no release commit")
}
