package group

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestSyncLogDates: the sync log dates every seq no earlier than it was
// appended (the lag rule's safety rests on it), the entries compacted
// away included, through bursts, pauses and a log of 4 entries; it keeps
// at most maxMarks marks; and aged is exactly what the dates say, so it
// never names a seq appended gateway_timeout ago or less.
func TestSyncLogDates(t *testing.T) {
	const d = 15 * time.Second
	for seed := uint64(1); seed <= 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		var l syncLog
		start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		l.init([]int{1, 4, 64, 10000}[rng.IntN(4)], 40)
		now := start
		truth := map[uint64]time.Time{}     // seq -> when appended
		every := []int{7, 500}[rng.IntN(2)] // rarely: marks pile up past maxMarks and merge
		for i := range 3000 {
			switch r := rng.IntN(10); {
			case r < 6: // a burst at one instant
			case r < 9:
				now = now.Add(time.Duration(rng.Int64N(int64(500 * time.Millisecond))))
			default:
				now = now.Add(time.Duration(rng.Int64N(int64(40 * time.Second))))
			}
			seq := l.append(syncEntry{kind: entryFence}, now, d/markSlots)
			truth[seq] = now
			if i%every != 0 {
				continue
			}
			if len(l.marks) > maxMarks {
				t.Fatalf("seed %d: %d marks", seed, len(l.marks))
			}
			probe := now.Add(time.Duration(rng.Int64N(int64(30 * time.Second))))
			aged := l.aged(probe, d)
			for s := uint64(1); s <= l.seq; s++ {
				at := l.appendedAt(s, probe)
				if want, ok := truth[s]; ok && at.Before(want) {
					t.Fatalf("seed %d: seq %d appended at %s dated %s", seed, s, want.Sub(start), at.Sub(start))
				}
				if old := probe.Sub(at) > d; old != (s <= aged) {
					t.Fatalf("seed %d: seq %d dated %s, probe %s: aged %d disagrees", seed, s, at.Sub(start), probe.Sub(start), aged)
				}
			}
		}
	}
}

// TestSyncLogDatesStayFine: compacted seqs keep dates close to the truth
// while the log turns over faster than gateway_timeout (4 entries, 100
// appends a second): aged trails the true horizon by at most a second,
// so the lag rule still releases handoffs about on time.
func TestSyncLogDatesStayFine(t *testing.T) {
	const d = 15 * time.Second
	var l syncLog
	l.init(4, 1)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	truth := map[uint64]time.Time{}
	for range 60 * 100 {
		now = now.Add(10 * time.Millisecond)
		truth[l.append(syncEntry{kind: entryDenied}, now, d/markSlots)] = now
		if at, ok := truth[l.aged(now, d)]; ok {
			if lateBy := now.Add(-d).Sub(at); lateBy > time.Second {
				t.Fatalf("aged %d appended %s before the horizon", l.aged(now, d), lateBy)
			}
		}
	}
	if aged := l.aged(now, d); truth[aged].IsZero() || now.Add(-d).Sub(truth[aged]) > time.Second {
		t.Fatalf("aged %d after a minute", aged)
	}
}
