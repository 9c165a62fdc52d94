package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/timeline"
)

// demoTimeline is 4 partitions delivered every 10 ms for 2 s by c1 and
// c2, the join of c3 at 1 s; partition 3 moves from c2 (epoch 4) to c3
// (epoch 10) with a pause of pause; unmoved partition 0 pauses extra
// more at 1.2s. Partition p is read under epoch p+1 until it moves.
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

// demoEpochOf is the epoch demoTimeline's records were read under.
func demoEpochOf(p int32, d timeline.Delivery) uint64 {
	if p == 3 && d.Member == "c3" {
		return 10
	}
	return uint64(p) + 1
}

// readsOf is what the demo's observe records for tl's deliveries, each
// read under epochOf.
func readsOf(tl timeline.Timeline, epochOf func(int32, timeline.Delivery) uint64) demoReads {
	r := demoReads{}
	for p := range tl.Partitions {
		for _, d := range tl.Deliveries[p] {
			r.add(p, d.Member, epochOf(p, d), d.At)
		}
	}
	return r
}

func judgeDemo(tl timeline.Timeline, w timeline.Window, epochOf func(int32, timeline.Delivery) uint64) demoSummary {
	a := timeline.Analyze(tl, w)
	return judge(a, checkEpochs(a, readsOf(tl, epochOf), w.JoinAt), 1, 50*time.Millisecond)
}

// lastLine is print's summary line.
func lastLine(out string) string {
	last := strings.TrimSpace(out)
	return last[strings.LastIndex(last, "\n")+1:]
}

func TestJudgeHolds(t *testing.T) {
	tl, w := demoTimeline(30*time.Millisecond, 0)
	s := judgeDemo(tl, w, demoEpochOf)
	if !s.ok() || len(s.Warnings) > 0 {
		t.Fatalf("failures: %v warnings: %v", s.Failures, s.Warnings)
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
	if len(s.Epochs.UnmovedChanged) != 0 || len(s.Epochs.MovedBad) != 0 || s.Epochs.Handoffs[3] != [2]uint64{4, 10} {
		t.Fatalf("epochs %+v, want partition 3 handed over 4 -> 10 and nothing else touched", s.Epochs)
	}
	var out bytes.Buffer
	s.print(&out, "demo", nil)
	want := "summary: moved=1 unmoved_epoch_changes=0 moved_epochs_rose=true moved_pause_p50_ms=30 moved_pause_max_ms=30 moved_beyond_max_ms=20 unmoved_beyond_max_ms=0 lost=0 duplicates=0 steady_max_ms=10 unmoved_pause_max_ms=10 join_to_stable_ms=40 produced=800 consumed=800 timing_warnings=0 ok=true"
	if last := lastLine(out.String()); last != want {
		t.Fatalf("last line\n got %s\nwant %s", last, want)
	}
	for _, line := range []string{
		"demo/3   c2 -> c3   epoch 4 -> 10   pause   30 ms   (steady 10 ms, beyond 20 ms)",
		"handoffs:           3 of 3 unmoved partitions were read by their holder under one epoch from before the join to the end; 1 of 1 moved partitions changed hands once, under a higher epoch",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("no line %q:\n%s", line, out.String())
		}
	}
	if strings.Contains(out.String(), "\nwarning: ") || strings.Contains(out.String(), "FAILED") {
		t.Errorf("a warning or failure where everything holds:\n%s", out.String())
	}
}

// TestJudgeWarnsOnTimingOnly: pauses beyond the tolerance or DESIGN's
// targets, with every partition's holder and epoch as they should be,
// are warnings; the demo holds.
func TestJudgeWarnsOnTimingOnly(t *testing.T) {
	cases := []struct {
		name         string
		pause, extra time.Duration
		want         string
	}{
		{"unmoved paused long, kept its epoch", 30 * time.Millisecond, 200 * time.Millisecond,
			"an unmoved partition paused 200 ms beyond the steady state (tolerance 50 ms); every unmoved partition kept its holder and epoch, so the rebalance did not pause it: the machine was too busy to judge timing (not a failure)"},
		{"moved paused beyond target", 300 * time.Millisecond, 0,
			"moved partitions paused p50 290 ms, max 290 ms beyond the steady state, over DESIGN's target (p50 <= 20 ms, max <= 100 ms)"},
	}
	for _, c := range cases {
		tl, w := demoTimeline(c.pause, c.extra)
		s := judgeDemo(tl, w, demoEpochOf)
		if !s.ok() {
			t.Errorf("%s: failures %q, want none (timing is not a verdict)", c.name, s.Failures)
		}
		if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], c.want) {
			t.Errorf("%s: warnings %q, want one containing %q", c.name, s.Warnings, c.want)
		}
		var out bytes.Buffer
		s.print(&out, "demo", nil)
		if !strings.Contains(out.String(), "\nwarning: "+c.want) {
			t.Errorf("%s: no warning line:\n%s", c.name, out.String())
		}
		if last := lastLine(out.String()); !strings.Contains(last, " unmoved_epoch_changes=0 moved_epochs_rose=true ") || !strings.HasSuffix(last, " timing_warnings=1 ok=true") {
			t.Errorf("%s: last line %s", c.name, last)
		}
	}
}

func TestJudgeFails(t *testing.T) {
	cases := []struct {
		name    string
		change  func(*timeline.Timeline, *timeline.Window)
		epochOf func(int32, timeline.Delivery) uint64
		want    string
	}{
		{"unmoved partition's epoch changed", nil, func(p int32, d timeline.Delivery) uint64 {
			if p == 1 && d.Offset >= 150 {
				return 7 // granted again to its holder after the join
			}
			return demoEpochOf(p, d)
		}, "unmoved partitions changed holder or epoch after the join (revoked, fenced or granted again): 1 (c1@2 -> c1@7)"},
		{"unmoved partition read by another member", func(tl *timeline.Timeline, _ *timeline.Window) {
			tl.Deliveries[2][150].Member = "c3"
		}, nil, "unmoved partitions changed holder or epoch after the join (revoked, fenced or granted again): 2 (c2@3 -> c3@3 -> c2@3)"},
		{"unmoved partition paused long and its epoch changed", func(tl *timeline.Timeline, w *timeline.Window) {
			*tl, *w = demoTimeline(30*time.Millisecond, 200*time.Millisecond)
		}, func(p int32, d timeline.Delivery) uint64 {
			if p == 0 && d.Offset >= 120 {
				return 8
			}
			return demoEpochOf(p, d)
		}, "unmoved partitions changed holder or epoch after the join (revoked, fenced or granted again): 0 (c1@1 -> c1@8)"},
		{"moved partition's epoch did not rise", nil, func(p int32, d timeline.Delivery) uint64 {
			if p == 3 && d.Member == "c3" {
				return 3
			}
			return demoEpochOf(p, d)
		}, "moved partitions did not change hands exactly once under a higher epoch: 3 (c2@4 -> c3@3: the epoch did not rise)"},
		{"moved partition kept its epoch", nil, func(p int32, d timeline.Delivery) uint64 { return uint64(p) + 1 },
			"3 (c2@4 -> c3@4: the epoch did not rise)"},
		{"moved partition changed twice", nil, func(p int32, d timeline.Delivery) uint64 {
			if p == 3 && d.Offset >= 150 {
				return 11
			}
			return demoEpochOf(p, d)
		}, "3 (2 changes after the join, want 1: c2@4 -> c3@10 -> c3@11)"},
		{"too many moved", func(tl *timeline.Timeline, _ *timeline.Window) {
			ds := tl.Deliveries[1]
			tl.Events[1] = append(tl.Events[1], timeline.Ownership{At: ds[150].At, Member: "c3", Held: true})
			for i := 150; i < len(ds); i++ {
				ds[i].Member = "c3"
			}
		}, nil, "2 partitions moved, want 1"},
		{"lost", func(tl *timeline.Timeline, _ *timeline.Window) { tl.Acked[2] = append(tl.Acked[2], 500) }, nil, "1 acknowledged records were never consumed"},
		{"duplicate", func(tl *timeline.Timeline, _ *timeline.Window) {
			ds := tl.Deliveries[1]
			tl.Deliveries[1] = append(ds, timeline.Delivery{At: ds[len(ds)-1].At, Offset: 7, Member: "c1"})
		}, nil, "1 records were consumed more than once"},
		{"never stable", func(tl *timeline.Timeline, _ *timeline.Window) { tl.Deliveries[3] = tl.Deliveries[3][:101] }, nil, "not consuming every partition again"},
		{"nothing produced", func(tl *timeline.Timeline, _ *timeline.Window) { tl.Acked = map[int32][]int64{} }, nil, "no record was produced"},
	}
	for _, c := range cases {
		tl, w := demoTimeline(30*time.Millisecond, 0)
		if c.change != nil {
			c.change(&tl, &w)
		}
		epochOf := c.epochOf
		if epochOf == nil {
			epochOf = demoEpochOf
		}
		s := judgeDemo(tl, w, epochOf)
		if s.ok() || !strings.Contains(strings.Join(s.Failures, "; "), c.want) {
			t.Errorf("%s: failures %q, want one containing %q", c.name, s.Failures, c.want)
			continue
		}
		var out bytes.Buffer
		s.print(&out, "demo", nil)
		if !strings.Contains(out.String(), "\nFAILED: ") || !strings.HasSuffix(lastLine(out.String()), " ok=false") {
			t.Errorf("%s: printed\n%s", c.name, out.String())
		}
	}
}

func TestDemoReadsRuns(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := demoReads{}
	for i, read := range []struct {
		member string
		epoch  uint64
	}{{"c1", 1}, {"c1", 1}, {"c1", 1}, {"c4", 2}, {"c4", 2}} {
		r.add(5, read.member, read.epoch, t0.Add(time.Duration(i)*time.Second))
	}
	want := []demoRun{{Member: "c1", Epoch: 1, From: t0, Count: 3}, {Member: "c4", Epoch: 2, From: t0.Add(3 * time.Second), Count: 2}}
	if len(r[5]) != 2 || r[5][0] != want[0] || r[5][1] != want[1] {
		t.Fatalf("runs %+v, want %+v", r[5], want)
	}
	at, after, ok := r.around(5, t0.Add(2500*time.Millisecond))
	if !ok || at != want[0] || len(after) != 1 || after[0] != want[1] {
		t.Fatalf("around the join: %+v %+v %v", at, after, ok)
	}
	if at, after, ok := r.around(5, t0.Add(-time.Second)); ok || len(after) != 2 {
		t.Fatalf("around a time before any record: %+v %+v %v, want no run in force", at, after, ok)
	}
}
