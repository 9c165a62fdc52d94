package bench

import (
	"testing"
	"time"
)

// Made-up timelines for analyze: two members, four partitions, a record
// every 10 ms, a newcomer at t=1s.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// deliveries returns one record every step in [from, to), all to member,
// offsets from first.
func deliveries(member string, from, to, step time.Duration, first int64) []delivery {
	var ds []delivery
	for d, o := from, first; d < to; d, o = d+step, o+1 {
		ds = append(ds, delivery{At: at(d), Offset: o, Member: member})
	}
	return ds
}

func held(member string, d time.Duration) ownership {
	return ownership{At: at(d), Member: member, Held: true}
}

func released(member string, d time.Duration) ownership {
	return ownership{At: at(d), Member: member}
}

// handoffTimeline: partition 0 moves from a to c, paused 80 ms (a's last
// record at 1.010s, c's first at 1.090s); 1 stays with a, 2 and 3 stay
// with b, which stalls for 40 ms at 1.29s.
func handoffTimeline() timeline {
	step := 10 * time.Millisecond
	tl := timeline{
		Partitions: 4, SteadyFrom: at(0), JoinAt: at(time.Second), WindowEnd: at(2 * time.Second),
		Settle: 100 * time.Millisecond, Newcomer: "c",
		Deliveries: map[int32][]delivery{}, Events: map[int32][]ownership{}, Acked: map[int32][]int64{},
	}
	tl.Deliveries[0] = append(deliveries("a", 0, 1020*time.Millisecond, step, 0), deliveries("c", 1090*time.Millisecond, 2*time.Second, step, 102)...)
	tl.Events[0] = []ownership{held("a", 0), released("a", 1015*time.Millisecond), held("c", 1080*time.Millisecond)}
	tl.Deliveries[1] = deliveries("a", 0, 2*time.Second, step, 0)
	tl.Events[1] = []ownership{held("a", 0)}
	for p := int32(2); p < 4; p++ {
		tl.Deliveries[p] = append(deliveries("b", 0, 1300*time.Millisecond, step, 0), deliveries("b", 1330*time.Millisecond, 2*time.Second, step, 130)...)
		tl.Events[p] = []ownership{held("b", 0)}
	}
	for p, ds := range tl.Deliveries {
		for _, d := range ds {
			tl.Acked[p] = append(tl.Acked[p], d.Offset)
		}
	}
	return tl
}

func TestAnalyzeHandoff(t *testing.T) {
	r := analyze(handoffTimeline())
	if len(r.Moved) != 1 || r.Moved[0].Partition != 0 || r.Moved[0].From != "a" || r.Moved[0].To != "c" {
		t.Fatalf("moved = %+v, want partition 0 from a to c", r.Moved)
	}
	if want := 70 * time.Millisecond; r.MovedMax != want || r.MovedP50 != want {
		t.Errorf("moved pause p50 %v max %v, want %v beyond the 10 ms steady gap", r.MovedP50, r.MovedMax, want)
	}
	// Stable once c consumed partition 0 (1.090s); the window ends 100 ms
	// later, so b's stall at 1.29s is outside it.
	if r.JoinToStable != 90*time.Millisecond || !r.Stable {
		t.Errorf("join to stable %v (stable %t), want 90ms", r.JoinToStable, r.Stable)
	}
	if r.UnmovedMax != 0 {
		t.Errorf("unmoved max %v, want 0 (b's stall is after the window)", r.UnmovedMax)
	}
	if r.NewcomerFirst != 90*time.Millisecond {
		t.Errorf("newcomer first record after %v, want 90ms", r.NewcomerFirst)
	}
	if r.Duplicates != 0 || r.Lost != 0 || r.Produced == 0 {
		t.Errorf("accounting: produced %d lost %d duplicates %d", r.Produced, r.Lost, r.Duplicates)
	}
}

func TestAnalyzeUnmovedPauseInsideWindow(t *testing.T) {
	tl := handoffTimeline()
	// c only starts at 1.35s: b's 40 ms stall now falls inside the window.
	tl.Deliveries[0] = append(deliveries("a", 0, 1020*time.Millisecond, 10*time.Millisecond, 0), deliveries("c", 1350*time.Millisecond, 2*time.Second, 10*time.Millisecond, 102)...)
	r := analyze(tl)
	if want := 30 * time.Millisecond; r.UnmovedMax != want {
		t.Errorf("unmoved max %v, want %v (40 ms gap minus 10 ms steady)", r.UnmovedMax, want)
	}
	if want := 330 * time.Millisecond; r.MovedMax != want {
		t.Errorf("moved max %v, want %v", r.MovedMax, want)
	}
}

func TestAnalyzeDuplicatesAndLost(t *testing.T) {
	tl := handoffTimeline()
	// c starts again from offset 100: 100 and 101 twice; 500 never came.
	ds := tl.Deliveries[0]
	tl.Deliveries[0] = append(ds[:102:102], append([]delivery{{At: at(1085 * time.Millisecond), Offset: 100, Member: "c"}, {At: at(1086 * time.Millisecond), Offset: 101, Member: "c"}}, ds[102:]...)...)
	tl.Acked[0] = append(tl.Acked[0], 500)
	r := analyze(tl)
	if r.Duplicates != 2 || r.Lost != 1 {
		t.Errorf("duplicates %d lost %d, want 2 and 1", r.Duplicates, r.Lost)
	}
}

func TestAnalyzeNeverStable(t *testing.T) {
	tl := handoffTimeline()
	tl.Deliveries[0] = deliveries("a", 0, 1020*time.Millisecond, 10*time.Millisecond, 0)
	r := analyze(tl)
	if r.Stable {
		t.Fatal("stable although c never consumed partition 0")
	}
	// Silent from 1.010s to the end of the run (2s): paused until then.
	if want := 990*time.Millisecond - 10*time.Millisecond; r.MovedMax != want {
		t.Errorf("moved max %v, want %v", r.MovedMax, want)
	}
}

func TestAnalyzeSlowMemberFloor(t *testing.T) {
	tl := handoffTimeline()
	tl.Slow, tl.SlowMax = "b", 500*time.Millisecond
	tl.Deliveries[2] = append(deliveries("b", 0, 1000*time.Millisecond, 10*time.Millisecond, 0), deliveries("b", 1400*time.Millisecond, 2*time.Second, 10*time.Millisecond, 100)...)
	r := analyze(tl)
	if r.UnmovedMax != 0 {
		t.Errorf("unmoved max %v, want 0: a 400 ms gap is within the slow member's 500 ms polls", r.UnmovedMax)
	}
	if r.SteadyMax != 10*time.Millisecond {
		t.Errorf("steady max %v, want the fast members' 10ms", r.SteadyMax)
	}
}

func TestOwnerAt(t *testing.T) {
	evs := []ownership{held("a", 0), released("a", 100*time.Millisecond), held("b", 150*time.Millisecond), held("c", 200*time.Millisecond)}
	for _, c := range []struct {
		at   time.Duration
		want string
	}{{50 * time.Millisecond, "a"}, {120 * time.Millisecond, ""}, {160 * time.Millisecond, "b"}, {time.Second, "c"}} {
		if got := ownerAt(evs, at(c.at)); got != c.want {
			t.Errorf("owner at %v = %q, want %q", c.at, got, c.want)
		}
	}
}

func TestSettled(t *testing.T) {
	tr := newTracker("run")
	now := t0.Add(time.Second)
	tr.hook("a", []int32{0, 1}, true, t0)
	tr.hook("b", []int32{2, 3}, true, t0)
	for p := range int32(4) {
		owner := map[bool]string{true: "a", false: "b"}[p < 2]
		tr.observe(owner, p, 1, []byte("run"), now.Add(-10*time.Millisecond))
		tr.observe(owner, p, 2, []byte("other run"), now)
	}
	if !tr.settled(4, []string{"a", "b"}, now.Add(-100*time.Millisecond), now) {
		t.Error("not settled although both members hold and consumed their share")
	}
	if tr.settled(4, []string{"a", "b", "c"}, now.Add(-100*time.Millisecond), now) {
		t.Error("settled although c holds nothing")
	}
	tr.hook("a", []int32{1}, false, now.Add(-50*time.Millisecond))
	if tr.settled(4, []string{"a", "b"}, now.Add(-100*time.Millisecond), now) {
		t.Error("settled although partition 1 changed hands within the quiet time")
	}
}

func TestOpenLoopCountsFailures(t *testing.T) {
	r := openLoop(2000, 20*time.Millisecond, 8, func(i int) error {
		if i%2 == 1 {
			return errFake
		}
		return nil
	})
	if r.Sent == 0 || r.Failed == 0 || r.Failed > r.Sent || r.FirstFail != errFake || r.Achieved <= 0 {
		t.Errorf("sent %d failed %d first %v", r.Sent, r.Failed, r.FirstFail)
	}
}

var errFake = fakeError("fake")

type fakeError string

func (e fakeError) Error() string { return string(e) }
