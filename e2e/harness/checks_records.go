package harness

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// CheckNoLostRecords: after the faults healed and the consumers drained,
// every record Kafka acknowledged to the producer was delivered to group
// (at least once), and every delivery of a produced offset carries the
// value produced there (never wrong data). Each partition's finding says
// which kind its undelivered records are (lostWhy): skipped past by an
// accepted commit (a real loss) or unread (the group was behind when the
// waiting ended).
func CheckNoLostRecords(s Snapshot, group string) []Violation {
	type offsetKey struct {
		topic     string
		partition int32
		offset    int64
	}
	delivered := map[offsetKey][]Delivery{}
	for _, d := range s.Deliveries {
		if d.Key.Group == group {
			k := offsetKey{d.Key.Topic, d.Key.Partition, d.Offset}
			delivered[k] = append(delivered[k], d)
		}
	}
	var out []Violation
	lost := map[string][]int64{}
	for _, p := range s.Produced {
		k := offsetKey{p.Topic, p.Partition, p.Offset}
		ds := delivered[k]
		if len(ds) == 0 {
			name := PartitionKey{Group: group, Topic: p.Topic, Partition: p.Partition}.String()
			lost[name] = append(lost[name], p.Offset)
			continue
		}
		for _, d := range ds {
			if d.Value != p.Value {
				out = append(out, Violation{InvNoLostRecord, d.At, fmt.Sprintf("%s offset %d: %s@ep%d got %q, produced %q",
					d.Key, d.Offset, d.Member, d.Epoch, d.Value, p.Value)})
			}
		}
	}
	committed := map[string]int64{}
	for _, c := range s.Commits {
		if c.Key.Group == group && c.Accepted() {
			name := c.Key.String()
			if o, ok := committed[name]; !ok || c.Offset > o {
				committed[name] = c.Offset
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(lost)) {
		offsets := lost[name]
		slices.Sort(offsets)
		out = append(out, Violation{InvNoLostRecord, 0, fmt.Sprintf("%s: %d acknowledged records never delivered to %s, first %v; %s",
			name, len(offsets), group, offsets[:min(len(offsets), 10)], lostWhy(committed, name, offsets[0]))})
	}
	return out
}

// lostWhy tells the two kinds of undelivered record apart: skipped (an
// accepted commit of the group is past the first one: no member will
// read it again, a real at-least-once loss) or unread (every accepted
// commit is at or before it: the group had not read that far yet, a
// stall when the waiting ended).
func lostWhy(committed map[string]int64, name string, first int64) string {
	o, ok := committed[name]
	switch {
	case !ok:
		return "no commit accepted: unread, not skipped"
	case o > first:
		return fmt.Sprintf("SKIPPED: a commit of %d was accepted past offset %d", o, first)
	default:
		return fmt.Sprintf("highest commit accepted %d: unread, not skipped", o)
	}
}

// stint is one member's holding of a partition at one epoch, as seen from
// its deliveries.
type stint struct {
	member  string
	epoch   uint64
	first   Time
	offsets map[int64]bool
	max     int64
}

// stints groups a partition's deliveries by (member, epoch), ordered by
// first delivery.
func stints(deliveries []Delivery) []*stint {
	type holding struct {
		member string
		epoch  uint64
	}
	byHolding := map[holding]*stint{}
	var out []*stint
	for _, d := range deliveries {
		h := holding{d.Member, d.Epoch}
		st := byHolding[h]
		if st == nil {
			st = &stint{member: d.Member, epoch: d.Epoch, first: d.At, offsets: map[int64]bool{}, max: -1}
			byHolding[h] = st
			out = append(out, st)
		}
		st.offsets[d.Offset] = true
		st.max = max(st.max, d.Offset)
	}
	slices.SortStableFunc(out, func(a, b *stint) int { return cmp.Compare(a.first, b.first) })
	return out
}

// CheckDuplicates: a clean handoff (the previous holder's release commit
// was accepted) causes no duplicate: the next holder delivers none of the
// offsets the previous one did. A crash (no release: killed, paused past
// its session, cut off) causes at most the records delivered after the
// last commit: over a partition, the deliveries beyond the first of each
// offset never outnumber the sum, over unclean handoffs into a holding Y,
// of (highest offset delivered before Y + 1 − the offset Y started at).
func CheckDuplicates(s Snapshot, p Params) []Violation {
	byKey := map[PartitionKey][]Delivery{}
	for _, d := range s.Deliveries {
		byKey[d.Key] = append(byKey[d.Key], d)
	}
	var out []Violation
	for key, deliveries := range byKey {
		out = append(out, checkPartitionDuplicates(s, p, key, deliveries)...)
	}
	return out
}

func checkPartitionDuplicates(s Snapshot, p Params, key PartitionKey, deliveries []Delivery) []Violation {
	var out []Violation
	count := map[int64]int{}
	for _, d := range deliveries {
		count[d.Offset]++
	}
	duplicates := 0
	for _, n := range count {
		duplicates += n - 1
	}
	sts := stints(deliveries)
	bound, earlierMax := 0, int64(-1)
	for i, y := range sts {
		if i > 0 {
			x := sts[i-1]
			if released(s.Commits, key, x.member, x.epoch) {
				if n := overlapping(x.offsets, y.offsets); n > 0 {
					out = append(out, Violation{InvDuplicates, y.first, fmt.Sprintf("%s: clean handoff %s@ep%d → %s@ep%d repeated %d records",
						key, x.member, x.epoch, y.member, y.epoch, n)})
				}
			} else {
				bound += int(max(0, earlierMax+1-startOf(s, p, key, y)))
			}
		}
		earlierMax = max(earlierMax, y.max)
	}
	if duplicates > bound {
		out = append(out, Violation{InvDuplicates, 0, fmt.Sprintf("%s: %d records delivered more than once, but unclean handoffs allow only %d (%d holdings)",
			key, duplicates, bound, len(sts))})
	}
	return out
}

// released reports an accepted release commit by member at epoch.
func released(commits []Commit, key PartitionKey, member string, epoch uint64) bool {
	for _, c := range commits {
		if c.Key == key && c.Member == member && c.Epoch == epoch && c.Release && c.Accepted() {
			return true
		}
	}
	return false
}

// startOf is the offset holding y started at: its grant's offset, or else
// the highest offset accepted before its first delivery.
func startOf(s Snapshot, p Params, key PartitionKey, y *stint) int64 {
	for _, g := range s.Grants {
		if g.Key == key && g.Member == y.member && g.Epoch == y.epoch && !g.Renewal && g.Offset >= 0 {
			return g.Offset
		}
	}
	start := p.LogStart
	for _, c := range s.Commits {
		if c.Key == key && c.Accepted() && c.Sent < y.first {
			start = max(start, c.Offset)
		}
	}
	return start
}

func overlapping(a, b map[int64]bool) int {
	n := 0
	for o := range b {
		if a[o] {
			n++
		}
	}
	return n
}
