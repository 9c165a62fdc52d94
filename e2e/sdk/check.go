package sdk

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/internal/timeline"
)

// Eventually polls cond until it holds, failing the test with what and
// cond's last explanation after timeout (harness.Eventually).
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	harness.Eventually(t, timeout, what, cond)
}

// Ledger is the deliveries of several members, merged.
type Ledger struct {
	all []Delivery
}

// NewLedger merges the members' deliveries as of now.
func NewLedger(members ...*Member) *Ledger {
	l := &Ledger{}
	for _, m := range members {
		l.all = append(l.all, m.Deliveries()...)
	}
	sort.SliceStable(l.all, func(i, j int) bool { return l.all[i].At.Before(l.all[j].At) })
	return l
}

// Of returns the deliveries of partition p in time order.
func (l *Ledger) Of(p int32) []Delivery {
	var out []Delivery
	for _, d := range l.all {
		if d.Partition == p {
			out = append(out, d)
		}
	}
	return out
}

// Count is the number of deliveries.
func (l *Ledger) Count() int { return len(l.all) }

// Reached reports whether every offset below end was delivered, naming
// the first partition that is behind. (The ledger's checks assume logs
// that start at offset 0: no retention.)
func (l *Ledger) Reached(end map[int32]int64) (bool, string) {
	seen := map[int32]map[int64]bool{}
	for _, d := range l.all {
		if seen[d.Partition] == nil {
			seen[d.Partition] = map[int64]bool{}
		}
		seen[d.Partition][d.Offset] = true
	}
	for _, p := range sortedKeys(end) {
		if got := int64(len(seen[p])); got < end[p] {
			return false, fmt.Sprintf("partition %d: %d of %d offsets delivered", p, got, end[p])
		}
	}
	return true, ""
}

// Duplicates returns, per partition, the offsets delivered more than once
// (with how often), and fails the test if any offset below end is missing
// or any offset at or beyond end was delivered.
func (l *Ledger) Duplicates(t testing.TB, end map[int32]int64) map[int32]map[int64]int {
	t.Helper()
	times := map[int32]map[int64]int{}
	for _, d := range l.all {
		if d.Offset < 0 || d.Offset >= end[d.Partition] {
			t.Errorf("partition %d: offset %d delivered to %s, beyond the log end %d", d.Partition, d.Offset, d.Member, end[d.Partition])
		}
		if times[d.Partition] == nil {
			times[d.Partition] = map[int64]int{}
		}
		times[d.Partition][d.Offset]++
	}
	dups := map[int32]map[int64]int{}
	for _, p := range sortedKeys(end) {
		var missing []int64
		for o := range end[p] {
			switch n := times[p][o]; {
			case n == 0:
				missing = append(missing, o)
			case n > 1:
				if dups[p] == nil {
					dups[p] = map[int64]int{}
				}
				dups[p][o] = n
			}
		}
		if len(missing) > 0 {
			t.Errorf("partition %d: %d offsets never delivered (lost), first %v", p, len(missing), missing[:min(len(missing), 10)])
		}
	}
	return dups
}

// ExactlyOnce fails the test unless every offset below end was delivered
// exactly once.
func (l *Ledger) ExactlyOnce(t testing.TB, end map[int32]int64) {
	t.Helper()
	for p, offsets := range l.Duplicates(t, end) {
		var first []string
		for _, o := range slices.Sorted(maps.Keys(offsets)) {
			if len(first) == 10 {
				break
			}
			first = append(first, fmt.Sprintf("%d×%d %s", o, offsets[o], l.whoDelivered(p, o)))
		}
		t.Errorf("partition %d: %d offsets delivered more than once: %s", p, len(offsets), strings.Join(first, ", "))
	}
}

func (l *Ledger) whoDelivered(p int32, o int64) string {
	var who []string
	for _, d := range l.all {
		if d.Partition == p && d.Offset == o {
			who = append(who, fmt.Sprintf("%s@ep%d", d.Member, d.Epoch))
		}
	}
	return "(" + strings.Join(who, " ") + ")"
}

// Sequential fails the test unless each partition's deliveries, in time
// order across all members, are exactly the offsets 0, 1, …, end−1: no
// loss, no repeat, no reordering, and every handoff resumes right after
// the record the previous holder delivered last.
func (l *Ledger) Sequential(t testing.TB, end map[int32]int64) {
	t.Helper()
	for _, p := range sortedKeys(end) {
		want := int64(0)
		for _, d := range l.Of(p) {
			if d.Offset != want {
				t.Errorf("partition %d: %s@ep%d delivered offset %d where %d was next", p, d.Member, d.Epoch, d.Offset, want)
				break
			}
			want++
		}
		if want != end[p] && !t.Failed() {
			t.Errorf("partition %d: delivered up to %d, log end %d", p, want, end[p])
		}
	}
}

// Values fails the test when a delivered record's value differs from the
// one the load produced at its offset (where the load knows it).
func (l *Ledger) Values(t testing.TB, load *Load) {
	t.Helper()
	produced := map[int32]map[int64]string{}
	for _, d := range l.all {
		if produced[d.Partition] == nil {
			produced[d.Partition] = load.Produced(d.Partition)
		}
		if want, ok := produced[d.Partition][d.Offset]; ok && want != d.Value {
			t.Errorf("partition %d offset %d: delivered %q, produced %q", d.Partition, d.Offset, d.Value, want)
		}
	}
}

// Stint is one member's uninterrupted hold of a partition at one epoch,
// as seen from its deliveries.
type Stint struct {
	Member      string
	Epoch       uint64
	First, Last Delivery
	Records     int
}

// Stints returns the stints of partition p in time order.
func (l *Ledger) Stints(p int32) []Stint {
	byKey := map[string]*Stint{}
	var order []*Stint
	for _, d := range l.Of(p) {
		key := fmt.Sprintf("%s/%d", d.Member, d.Epoch)
		s := byKey[key]
		if s == nil {
			s = &Stint{Member: d.Member, Epoch: d.Epoch, First: d}
			byKey[key] = s
			order = append(order, s)
		}
		s.Last = d
		s.Records++
	}
	out := make([]Stint, len(order))
	for i, s := range order {
		out[i] = *s
	}
	return out
}

// Exclusive fails the test if two stints of one partition overlap in
// time: no partition may be delivered to two consumers (or under two
// epochs) at once.
func (l *Ledger) Exclusive(t testing.TB, partitions int32) {
	t.Helper()
	for p := range partitions {
		stints := l.Stints(p)
		for i := 1; i < len(stints); i++ {
			prev, next := stints[i-1], stints[i]
			if next.First.At.Before(prev.Last.At) {
				t.Errorf("partition %d: %s@ep%d delivered from %s while %s@ep%d delivered until %s",
					p, next.Member, next.Epoch, next.First.At.Format("15:04:05.000"),
					prev.Member, prev.Epoch, prev.Last.At.Format("15:04:05.000"))
			}
		}
	}
}

// Pause is partition p's pause over [from, to] by the one definition
// (timeline.Pause): the longest time between two consecutive deliveries,
// whichever member got them, overlapping the window.
func (l *Ledger) Pause(p int32, from, to time.Time) time.Duration {
	var ds []timeline.Delivery
	for _, d := range l.Of(p) {
		ds = append(ds, timeline.Delivery{At: d.At, Offset: d.Offset, Member: d.Member})
	}
	return timeline.Pause(ds, from, to)
}

// WaitDelivered waits until the members delivered every offset below end.
func WaitDelivered(t testing.TB, timeout time.Duration, end map[int32]int64, members ...*Member) *Ledger {
	t.Helper()
	var l *Ledger
	harness.Eventually(t, timeout, "every produced record delivered", func() (bool, string) {
		l = NewLedger(members...)
		return l.Reached(end)
	})
	return l
}

// Percentile returns the q-quantile (0..1) of ds, nearest rank.
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func sortedKeys[V any](m map[int32]V) []int32 {
	return slices.Sorted(maps.Keys(m))
}

// OffsetRange is the offsets from, from+1, …, to-1: the records a
// consumer reading [from, to) delivers, in order.
func OffsetRange(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}
