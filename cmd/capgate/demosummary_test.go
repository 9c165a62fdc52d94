package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/timeline"
)

// demoTimeline is 4 partitions delivered every 10 ms for 2 s by c1 and
// c2, the join of c3 at 1 s; partition 3 moves from c2 to c3 with a
// pause of pause; unmoved partition 0 pauses extra more at 1.2s.
func demoTimeline(pause, extra time.Duration) (timeline.Timeline, timeline.Window) {
	t0 := time.Unix(1000, 0)
	tl := timeline.Timeline{Partitions: 4, Deliveries: map[int32][]timeline.Delivery{}, Events: map[int32][]timeline.Ownership{}, Acked: map[int32][]int64{}}
	w := timeline.Window{SteadyFrom: t0, JoinAt: t0.Add(time.Second), End: t0.Add(2 * time.Second), Settle: 500 * time.Millisecond, Newcomer: "c3"}
	for p := range int32(4) {
		owner := map[bool]string{true: "c1", false: "c2"}[p < 2]
		tl.Events[p] = []timeline.Ownership{{At: t0, Member: owner, Held: true}}
		at := t0
		for i := range 200 {
			at = at.Add(10 * time.Millisecond)
			member := owner
			switch {
			case p == 3 && i == 101:
				at = at.Add(pause - 10*time.Millisecond)
				tl.Events[p] = append(tl.Events[p], timeline.Ownership{At: at.Add(-time.Millisecond), Member: "c2"}, timeline.Ownership{At: at.Add(-time.Millisecond), Member: "c3", Held: true})
			case p == 0 && i == 120:
				at = at.Add(extra)
			}
			if p == 3 && i >= 101 {
				member = "c3"
			}
			tl.Deliveries[p] = append(tl.Deliveries[p], timeline.Delivery{At: at, Offset: int64(i), Member: member})
			tl.Acked[p] = append(tl.Acked[p], int64(i))
		}
	}
	return tl, w
}

func TestJudgeHolds(t *testing.T) {
	s := judge(timeline.Analyze(demoTimeline(30*time.Millisecond, 0)), 1, 50*time.Millisecond)
	if !s.ok() {
		t.Fatalf("failures: %v", s.Failures)
	}
	if len(s.Moved) != 1 || s.Moved[0].Partition != 3 || s.MovedPause.Max != 30*time.Millisecond || s.MovedExtra.Max != 20*time.Millisecond {
		t.Fatalf("moved %+v pause %+v beyond %+v, want partition 3 paused 30ms, 20ms beyond", s.Moved, s.MovedPause, s.MovedExtra)
	}
	if len(s.Unmoved) != 3 || s.UnmovedExtra.Max != 0 || s.SteadyMax != 10*time.Millisecond {
		t.Fatalf("unmoved %d beyond %+v steady %s", len(s.Unmoved), s.UnmovedExtra, s.SteadyMax)
	}
	if s.Produced != 800 || s.Delivered != 800 || s.Lost != 0 || s.Duplicates != 0 {
		t.Fatalf("accounting %+v", s.Analysis)
	}
	var out bytes.Buffer
	s.print(&out, "demo", nil)
	last := strings.TrimSpace(out.String())
	last = last[strings.LastIndex(last, "\n")+1:]
	want := "summary: moved=1 moved_pause_p50_ms=30 moved_pause_max_ms=30 moved_beyond_max_ms=20 unmoved_beyond_max_ms=0 lost=0 duplicates=0 steady_max_ms=10 unmoved_pause_max_ms=10 join_to_stable_ms=40 produced=800 consumed=800 ok=true"
	if last != want {
		t.Fatalf("last line\n got %s\nwant %s", last, want)
	}
	if !strings.Contains(out.String(), "demo/3   c2 -> c3   pause   30 ms   (steady 10 ms, beyond 20 ms)") {
		t.Errorf("no line for the moved partition:\n%s", out.String())
	}
}

func TestJudgeFails(t *testing.T) {
	cases := []struct {
		name   string
		change func(*timeline.Timeline, *timeline.Window)
		want   string
	}{
		{"unmoved partition paused", func(tl *timeline.Timeline, w *timeline.Window) {
			*tl, *w = demoTimeline(30*time.Millisecond, 200*time.Millisecond)
		}, "unmoved partition paused 200 ms"},
		{"too many moved", func(tl *timeline.Timeline, _ *timeline.Window) {
			ds := tl.Deliveries[1]
			tl.Events[1] = append(tl.Events[1], timeline.Ownership{At: ds[150].At, Member: "c3", Held: true})
			for i := 150; i < len(ds); i++ {
				ds[i].Member = "c3"
			}
		}, "2 partitions moved, want 1"},
		{"lost", func(tl *timeline.Timeline, _ *timeline.Window) { tl.Acked[2] = append(tl.Acked[2], 500) }, "1 acknowledged records were never consumed"},
		{"duplicate", func(tl *timeline.Timeline, _ *timeline.Window) {
			ds := tl.Deliveries[1]
			tl.Deliveries[1] = append(ds, timeline.Delivery{At: ds[len(ds)-1].At, Offset: 7, Member: "c1"})
		}, "1 records were consumed more than once"},
		{"never stable", func(tl *timeline.Timeline, _ *timeline.Window) { tl.Deliveries[3] = tl.Deliveries[3][:101] }, "not consuming every partition again"},
	}
	for _, c := range cases {
		tl, w := demoTimeline(30*time.Millisecond, 0)
		c.change(&tl, &w)
		s := judge(timeline.Analyze(tl, w), 1, 50*time.Millisecond)
		if s.ok() || !strings.Contains(strings.Join(s.Failures, "; "), c.want) {
			t.Errorf("%s: failures %q, want one containing %q", c.name, s.Failures, c.want)
		}
	}
}
