package timeline

import (
	"testing"
	"time"
)

// Made-up timelines: two members, four partitions, a record every 10 ms,
// a newcomer at t=1s.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// deliveries returns one record every step in [from, to), all to member,
// offsets from first.
func deliveries(member string, from, to, step time.Duration, first int64) []Delivery {
	var ds []Delivery
	for d, o := from, first; d < to; d, o = d+step, o+1 {
		ds = append(ds, Delivery{At: at(d), Offset: o, Member: member})
	}
	return ds
}

func held(member string, d time.Duration) Ownership {
	return Ownership{At: at(d), Member: member, Held: true}
}

func released(member string, d time.Duration) Ownership { return Ownership{At: at(d), Member: member} }

func TestPause(t *testing.T) {
	step := 10 * time.Millisecond
	// 100 ms between the records at 490ms and 590ms; the last at 990ms.
	ds := append(deliveries("a", 0, 500*time.Millisecond, step, 0), deliveries("a", 590*time.Millisecond, time.Second, step, 50)...)
	cases := []struct {
		name     string
		ds       []Delivery
		from, to time.Duration
		want     time.Duration
	}{
		{"window holding the pause", ds, 400 * time.Millisecond, 700 * time.Millisecond, 100 * time.Millisecond},
		{"window before it", ds, 100 * time.Millisecond, 400 * time.Millisecond, 10 * time.Millisecond},
		{"window inside the pause: counted whole", ds, 550 * time.Millisecond, 560 * time.Millisecond, 100 * time.Millisecond},
		{"silent until the window's end", ds, 1000 * time.Millisecond, 1500 * time.Millisecond, 510 * time.Millisecond},
		// The demo's old rule ignored this case: silent since before the
		// window, it paused through all of it.
		{"silent since before the window", deliveries("a", 0, 300*time.Millisecond, step, 0), 500 * time.Millisecond, time.Second, 710 * time.Millisecond},
		{"never delivered", nil, 500 * time.Millisecond, time.Second, 500 * time.Millisecond},
	}
	for _, c := range cases {
		if got := Pause(c.ds, at(c.from), at(c.to)); got != c.want {
			t.Errorf("%s: Pause = %v, want %v", c.name, got, c.want)
		}
	}
	if got := SteadyGap(ds, at(0), at(time.Second)); got != 100*time.Millisecond {
		t.Errorf("SteadyGap = %v, want 100ms", got)
	}
	if got := SteadyGap(ds, at(0), at(500*time.Millisecond)); got != step {
		t.Errorf("SteadyGap before the pause = %v, want %v", got, step)
	}
}

// handoffTimeline: partition 0 moves from a to c, paused 80 ms (a's last
// record at 1.010s, c's first at 1.090s); 1 stays with a, 2 and 3 stay
// with b, which stalls for 40 ms at 1.29s.
func handoffTimeline() (Timeline, Window) {
	step := 10 * time.Millisecond
	tl := Timeline{Partitions: 4, Deliveries: map[int32][]Delivery{}, Events: map[int32][]Ownership{}, Acked: map[int32][]int64{}}
	w := Window{SteadyFrom: at(0), JoinAt: at(time.Second), End: at(2 * time.Second), Settle: 100 * time.Millisecond, Newcomer: "c"}
	tl.Deliveries[0] = append(deliveries("a", 0, 1020*time.Millisecond, step, 0), deliveries("c", 1090*time.Millisecond, 2*time.Second, step, 102)...)
	tl.Events[0] = []Ownership{held("a", 0), released("a", 1015*time.Millisecond), held("c", 1080*time.Millisecond)}
	tl.Deliveries[1] = deliveries("a", 0, 2*time.Second, step, 0)
	tl.Events[1] = []Ownership{held("a", 0)}
	for p := int32(2); p < 4; p++ {
		tl.Deliveries[p] = append(deliveries("b", 0, 1300*time.Millisecond, step, 0), deliveries("b", 1330*time.Millisecond, 2*time.Second, step, 130)...)
		tl.Events[p] = []Ownership{held("b", 0)}
	}
	for p, ds := range tl.Deliveries {
		for _, d := range ds {
			tl.Acked[p] = append(tl.Acked[p], d.Offset)
		}
	}
	return tl, w
}

func TestAnalyzeHandoff(t *testing.T) {
	a := Analyze(handoffTimeline())
	if len(a.Moved) != 1 || a.Moved[0].Partition != 0 || a.Moved[0].From != "a" || a.Moved[0].To != "c" {
		t.Fatalf("moved = %+v, want partition 0 from a to c", a.Moved)
	}
	if want := (Quantiles{80 * time.Millisecond, 80 * time.Millisecond}); a.MovedPause != want {
		t.Errorf("moved pause %+v, want %+v", a.MovedPause, want)
	}
	if want := (Quantiles{70 * time.Millisecond, 70 * time.Millisecond}); a.MovedExtra != want {
		t.Errorf("moved pause beyond the 10 ms steady gap %+v, want %+v", a.MovedExtra, want)
	}
	// Stable once c consumed partition 0 (1.090s); the window ends 100 ms
	// later, so b's stall at 1.29s is outside it.
	if a.JoinToStable != 90*time.Millisecond || !a.Stable {
		t.Errorf("join to stable %v (stable %t), want 90ms", a.JoinToStable, a.Stable)
	}
	if a.UnmovedExtra.Max != 0 || a.UnmovedPause.Max != 10*time.Millisecond {
		t.Errorf("unmoved %+v beyond %+v, want a 10ms pause, 0 beyond (b's stall is after the window)", a.UnmovedPause, a.UnmovedExtra)
	}
	if a.NewcomerFirst != 90*time.Millisecond {
		t.Errorf("newcomer first record after %v, want 90ms", a.NewcomerFirst)
	}
	if a.Duplicates != 0 || a.Lost != 0 || a.Produced == 0 || a.Delivered != a.Produced {
		t.Errorf("accounting: produced %d delivered %d lost %d duplicates %d", a.Produced, a.Delivered, a.Lost, a.Duplicates)
	}
}

func TestAnalyzeUnmovedPauseInsideWindow(t *testing.T) {
	tl, w := handoffTimeline()
	// c only starts at 1.35s: b's 40 ms stall now falls inside the window.
	tl.Deliveries[0] = append(deliveries("a", 0, 1020*time.Millisecond, 10*time.Millisecond, 0), deliveries("c", 1350*time.Millisecond, 2*time.Second, 10*time.Millisecond, 102)...)
	a := Analyze(tl, w)
	if want := 30 * time.Millisecond; a.UnmovedExtra.Max != want {
		t.Errorf("unmoved beyond steady %v, want %v (40 ms gap minus 10 ms steady)", a.UnmovedExtra.Max, want)
	}
	if want := 330 * time.Millisecond; a.MovedExtra.Max != want {
		t.Errorf("moved beyond steady %v, want %v", a.MovedExtra.Max, want)
	}
}

func TestAnalyzeDuplicatesAndLost(t *testing.T) {
	tl, w := handoffTimeline()
	// c starts again from offset 100: 100 and 101 twice; 500 never came.
	ds := tl.Deliveries[0]
	tl.Deliveries[0] = append(ds[:102:102], append([]Delivery{{At: at(1085 * time.Millisecond), Offset: 100, Member: "c"}, {At: at(1086 * time.Millisecond), Offset: 101, Member: "c"}}, ds[102:]...)...)
	tl.Acked[0] = append(tl.Acked[0], 500)
	a := Analyze(tl, w)
	if a.Duplicates != 2 || a.Lost != 1 || a.Delivered != a.Produced-1 {
		t.Errorf("duplicates %d lost %d delivered %d of %d, want 2, 1, all but one", a.Duplicates, a.Lost, a.Delivered, a.Produced)
	}
}

func TestAnalyzeNeverStable(t *testing.T) {
	tl, w := handoffTimeline()
	tl.Deliveries[0] = deliveries("a", 0, 1020*time.Millisecond, 10*time.Millisecond, 0)
	a := Analyze(tl, w)
	if a.Stable {
		t.Fatal("stable although c never consumed partition 0")
	}
	// Silent from 1.010s to the end of the run (2s): paused until then.
	if want := 990 * time.Millisecond; a.MovedPause.Max != want {
		t.Errorf("moved pause %v, want %v", a.MovedPause.Max, want)
	}
}

func TestAnalyzeSlowMemberFloor(t *testing.T) {
	tl, w := handoffTimeline()
	w.Slow, w.SlowMax = "b", 500*time.Millisecond
	tl.Deliveries[2] = append(deliveries("b", 0, 1000*time.Millisecond, 10*time.Millisecond, 0), deliveries("b", 1400*time.Millisecond, 2*time.Second, 10*time.Millisecond, 100)...)
	a := Analyze(tl, w)
	if a.UnmovedExtra.Max != 0 {
		t.Errorf("unmoved beyond steady %v, want 0: a 400 ms gap is within the slow member's 500 ms polls", a.UnmovedExtra.Max)
	}
	if a.SteadyMax != 10*time.Millisecond {
		t.Errorf("steady max %v, want the fast members' 10ms", a.SteadyMax)
	}
}

func TestOwnerAt(t *testing.T) {
	evs := []Ownership{held("a", 0), released("a", 100*time.Millisecond), held("b", 150*time.Millisecond), held("c", 200*time.Millisecond)}
	for _, c := range []struct {
		at   time.Duration
		want string
	}{{50 * time.Millisecond, "a"}, {120 * time.Millisecond, ""}, {160 * time.Millisecond, "b"}, {time.Second, "c"}} {
		if got := OwnerAt(evs, at(c.at)); got != c.want {
			t.Errorf("owner at %v = %q, want %q", c.at, got, c.want)
		}
	}
}

func TestRecorderSettledAndDrained(t *testing.T) {
	r := NewRecorder()
	now := t0.Add(time.Second)
	r.Hold("a", []int32{0, 1}, true, t0)
	r.Hold("b", []int32{2, 3}, true, t0)
	for p := range int32(4) {
		owner := map[bool]string{true: "a", false: "b"}[p < 2]
		r.Acked(p, 1)
		r.Deliver(owner, p, 1, now.Add(-10*time.Millisecond))
	}
	if !r.Settled(4, []string{"a", "b"}, now.Add(-100*time.Millisecond), now) {
		t.Error("not settled although both members hold and consumed their share")
	}
	if r.Settled(4, []string{"a", "b", "c"}, now.Add(-100*time.Millisecond), now) {
		t.Error("settled although c holds nothing")
	}
	if !r.Drained() {
		t.Error("not drained although every acknowledged offset was delivered")
	}
	r.Acked(3, 2)
	if r.Drained() {
		t.Error("drained although offset 2 of partition 3 was never delivered")
	}
	r.Hold("a", []int32{1}, false, now.Add(-50*time.Millisecond))
	if r.Settled(4, []string{"a", "b"}, now.Add(-100*time.Millisecond), now) {
		t.Error("settled although partition 1 changed hands within the quiet time")
	}
}
