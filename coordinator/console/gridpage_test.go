package console

import (
	"bytes"
	"fmt"
	"testing"
)

// bigGroup is a group view of n partitions of topic t, every one owned.
func bigGroup(n int32) groupView {
	v := groupView{Name: "g", Topics: []topicView{{Topic: "t"}}}
	for p := range n {
		v.Topics[0].Cells = append(v.Topics[0].Cells, cellView{Topic: "t", Partition: p, Holder: "capgate-consume-0123456789abcdef", State: "owned", Colour: "c1", Committed: "12345", Lag: "0"})
	}
	return v
}

// TestGridWindow: a page of the grid is gridPageCells partitions from
// From, across topics, with the links of its neighbours; the filter
// keeps the partitions not owned and counts only them.
func TestGridWindow(t *testing.T) {
	v := bigGroup(1100)
	v.Topics = append(v.Topics, topicView{Topic: "u", Cells: []cellView{{Topic: "u", Partition: 0, State: "unowned"}, {Topic: "u", Partition: 1, State: "revoking"}}})
	v.Topics[0].Cells[3].State = "revoking"
	for _, c := range []struct {
		q                  gridQuery
		shown, total       int
		first, next, topic string
	}{
		{gridQuery{}, 500, 1102, "", "/console/groups/g?from=500", "t/0"},
		{gridQuery{From: 1000}, 102, 1102, "/console/groups/g", "", "t/1000"},
		{gridQuery{From: 1101}, 1, 1102, "/console/groups/g", "", "u/1"},
		{gridQuery{From: 2000}, 0, 1102, "/console/groups/g", "", ""},
		{gridQuery{Moving: true}, 3, 3, "", "", "t/3"},
	} {
		w := v
		w.window(c.q)
		first := ""
		if len(w.Topics) > 0 {
			first = fmt.Sprintf("%s/%d", w.Topics[0].Topic, w.Topics[0].Cells[0].Partition)
		}
		if w.Grid.Shown != c.shown || w.Grid.Total != c.total || w.Grid.First != c.first || w.Grid.Next != c.next || first != c.topic {
			t.Errorf("%+v: %+v, first cell %s", c.q, w.Grid, first)
		}
	}
}

// BenchmarkGroupLive: the group page's re-read of a group of 10,000
// partitions (describe_page_max's default), one page of its grid. The
// whole grid was 9.1 MB in 0.66–0.85 s (a loaded 2-core machine).
func BenchmarkGroupLive(b *testing.B) {
	pages, err := parsePages()
	if err != nil {
		b.Fatal(err)
	}
	all := bigGroup(10000)
	var buf bytes.Buffer
	for b.Loop() {
		v := all
		v.window(gridQuery{})
		buf.Reset()
		if err := pages["live"].ExecuteTemplate(&buf, "live", pageData{Body: v}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "bytes")
}
