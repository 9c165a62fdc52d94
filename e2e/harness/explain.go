package harness

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Explain renders what the log holds about one partition of a group, in
// time order — grants, revokes, commits, the coordinator's view, the
// gateways' fences and the last fetches and deliveries — for failure
// messages.
func (s Snapshot) Explain(key PartitionKey, lastN int) string {
	var lines []explainLine
	add := func(at Time, format string, args ...any) {
		lines = append(lines, explainLine{at, fmt.Sprintf(format, args...)})
	}
	for _, g := range s.Grants {
		if g.Key == key {
			add(g.At, "grant  %s (%s) epoch %d offset %d renewal %v expires %s", g.Member, g.Consumer, g.Epoch, g.Offset, g.Renewal, g.Expires)
		}
	}
	for _, r := range s.Revokes {
		if r.Key == key {
			add(r.At, "revoke %s (%s) epoch %d", r.Member, r.Consumer, r.Epoch)
		}
	}
	for _, c := range s.Commits {
		if c.Key == key {
			add(c.Sent, "commit %s (%s) epoch %d offset %d release %v -> %d %s answered %v at %s", c.Member, c.Consumer, c.Epoch, c.Offset, c.Release, c.Status, c.Code, c.Answered, c.Done)
		}
	}
	var last PartitionState
	for _, o := range s.Partitions {
		if o.Key == key && (o.Epoch != last.Epoch || o.State != last.State || o.Owner != last.Owner || o.Committed != last.Committed) {
			add(o.At, "coord  epoch %d %s owner %s committed %d", o.Epoch, o.State, o.Owner, o.Committed)
			last = o
		}
	}
	for _, a := range s.SyncAnswers {
		for _, f := range a.Fences {
			if fenceKey(f) == key {
				add(a.At, "fence  %d to %s (seq %d reset %v)", f.Epoch, a.Gateway, a.Seq, a.Reset)
			}
		}
	}
	lines = append(lines, lastOf(s, key, lastN)...)
	slices.SortStableFunc(lines, func(a, b explainLine) int { return cmp.Compare(a.at, b.at) })
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n", key)
	for _, l := range lines {
		fmt.Fprintf(&b, "  %s %s\n", l.at, l.text)
	}
	return b.String()
}

type explainLine struct {
	at   Time
	text string
}

// lastOf renders the last n fetches and deliveries of key.
func lastOf(s Snapshot, key PartitionKey, n int) []explainLine {
	var out []explainLine
	var fetches []Fetch
	for _, f := range s.Fetches {
		if f.Key == key {
			fetches = append(fetches, f)
		}
	}
	for _, f := range fetches[max(0, len(fetches)-n):] {
		out = append(out, explainLine{f.Start, fmt.Sprintf("fetch  %s %s@ep%d offset %d -> %s next %d records %d until %s",
			f.Gateway, f.Holder, f.Epoch, f.Offset, f.Outcome, f.Next, f.Records, f.End)})
	}
	var ds []Delivery
	for _, d := range s.Deliveries {
		if d.Key == key {
			ds = append(ds, d)
		}
	}
	for _, d := range ds[max(0, len(ds)-n):] {
		out = append(out, explainLine{d.At, fmt.Sprintf("record %s (%s) epoch %d offset %d", d.Member, d.Consumer, d.Epoch, d.Offset)})
	}
	var cf []ClientFetch
	for _, f := range s.ClientFetches {
		if f.Key == key {
			cf = append(cf, f)
		}
	}
	for _, f := range cf[max(0, len(cf)-n):] {
		out = append(out, explainLine{f.Sent, fmt.Sprintf("cfetch %s (%s) epoch %d offset %d at %s -> %d %s at %s",
			f.Member, f.Consumer, f.Epoch, f.Offset, f.Gateway, f.Status, f.Code, f.Done)})
	}
	return out
}
