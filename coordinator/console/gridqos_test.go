package console

import (
	"fmt"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
)

// qosOverrides is the admin API's list of overrides, for markQoS.
func qosOverrides(sels []api.QoSSelector, set func(i int, o *qosOverride)) qosJSON {
	var q qosJSON
	q.Overrides = make([]qosOverride, len(sels))
	for i, s := range sels {
		q.Overrides[i].ID, q.Overrides[i].Selector = fmt.Sprintf("o%05d", i), s
		set(i, &q.Overrides[i])
	}
	return q
}

func part(p int32) *int32 { return &p }

// grid is a group view of topics t (3 partitions, held by a and b) and
// u (1, unowned).
func grid() groupView {
	return groupView{Name: "g", Topics: []topicView{
		{Cells: []cellView{{Topic: "t", Partition: 0, Holder: "a"}, {Topic: "t", Partition: 1, Holder: "b"}, {Topic: "t", Partition: 2, Holder: "a"}}},
		{Cells: []cellView{{Topic: "u", Partition: 0}}},
	}}
}

// TestGridCellQoS: a cell names each override whose selector matches its
// partition as held — group, topic, partition, holder, each when named;
// a jti selector or another group's never — rates, then log levels, then
// monitor tags, each in the API's order.
func TestGridCellQoS(t *testing.T) {
	sels := []api.QoSSelector{
		{Group: "g", Topic: "t", Partition: part(1)}, // 0: t/1
		{Topic: "t"},                 // 1: every t
		{Holder: "a"},                // 2: a's
		{Group: "other", Topic: "t"}, // 3: not this group
		{Group: "g", JTI: "x"},       // 4: a capability
		{Partition: part(0)},         // 5: partition 0 of any topic
		{Group: "g"},                 // 6: every cell
		{Topic: "t", Partition: part(2), Holder: "b"}, // 7: t/2 held by b: not now
	}
	q := qosOverrides(sels, func(i int, o *qosOverride) {
		switch i {
		case 0, 3, 4, 7:
			o.MaxBytesPerSec = int64(1000 * (i + 1))
		case 1:
			o.LogLevel = "debug"
		case 2:
			o.Monitor, o.MaxBytesPerSec = "A", 500
		case 5:
			o.LogLevel = "warn"
		case 6:
			o.Monitor = "G"
		}
	})
	v := grid()
	v.markQoS(q)
	want := [][]string{
		{"throttled 500 B/s · log debug · log warn · monitor A · monitor G", "throttled 1000 B/s · log debug · monitor G", "throttled 500 B/s · log debug · monitor A · monitor G"},
		{"log warn · monitor G"},
	}
	for ti := range want {
		for ci, w := range want[ti] {
			if got := v.Topics[ti].Cells[ci].QoS; got != w {
				c := v.Topics[ti].Cells[ci]
				t.Errorf("%s/%d held by %q: %q, want %q", c.Topic, c.Partition, c.Holder, got, w)
			}
		}
	}
}

// TestGridCellQoSBounded: overrides with one selector and different ids
// each match every cell; a cell names the first few and how many more.
// Before, each of a grid's cells named them all: with 2,000 such
// overrides (qos_overrides allows 10,000) some 40 KB a cell, and at a
// grid of 10,000 partitions gigabytes a page, rebuilt at every 5 s
// re-read of an open group page.
func TestGridCellQoSBounded(t *testing.T) {
	const n = 2000
	sels := make([]api.QoSSelector, n)
	for i := range sels {
		sels[i] = api.QoSSelector{Group: "g"}
	}
	q := qosOverrides(sels, func(i int, o *qosOverride) { o.MaxBytesPerSec = int64(1000 + i) })
	v := grid()
	v.markQoS(q)
	for _, tv := range v.Topics {
		for _, c := range tv.Cells {
			want := fmt.Sprintf("throttled 1000 B/s · throttled 1001 B/s · throttled 1002 B/s · throttled 1003 B/s · %d more overrides", n-maxCellQoS)
			if len(c.QoS) > 200 || c.QoS != want {
				t.Errorf("%s/%d: %d bytes %q…, want %q", c.Topic, c.Partition, len(c.QoS), c.QoS[:min(len(c.QoS), 120)], want)
			}
			if !strings.HasPrefix(c.QoS, "throttled 1000 B/s") {
				t.Errorf("%s/%d: not the API's first override first: %.60q", c.Topic, c.Partition, c.QoS)
			}
		}
	}
}

// BenchmarkGridCellQoS: a grid of 10,000 partitions beside 10,000
// overrides, one per partition (the limits' defaults: qos_overrides,
// describe_page_max) — each re-read of an open group page. Reading every
// override for every cell took 2.5 s; the index 19 ms (a loaded 2-core
// machine).
func BenchmarkGridCellQoS(b *testing.B) {
	const n = 10000
	sels := make([]api.QoSSelector, n)
	for i := range sels {
		sels[i] = api.QoSSelector{Group: "g", Topic: "t", Partition: part(int32(i))}
	}
	q := qosOverrides(sels, func(i int, o *qosOverride) { o.MaxBytesPerSec = 1000 })
	v := groupView{Name: "g", Topics: []topicView{{}}}
	for p := range int32(n) {
		v.Topics[0].Cells = append(v.Topics[0].Cells, cellView{Topic: "t", Partition: p, Holder: "m-0123456789abcdef"})
	}
	for b.Loop() {
		v.markQoS(q)
	}
}
