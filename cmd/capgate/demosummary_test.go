package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// timeline builds observations every step from start for n records,
// skipping the instants in gaps (a pause from at to at+length).
func timeline(start time.Time, step time.Duration, n int, gaps map[int]time.Duration) []observation {
	var obs []observation
	at := start
	for i := range n {
		at = at.Add(step + gaps[i])
		obs = append(obs, observation{at: at, offset: int64(i)})
	}
	return obs
}

func TestLongestGap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	obs := timeline(t0, 10*time.Millisecond, 100, map[int]time.Duration{50: 90 * time.Millisecond})
	// record 50 arrives 100 ms after record 49, at t0+600ms.
	cases := []struct {
		name     string
		from, to time.Time
		want     time.Duration
	}{
		{"window holding the pause", t0.Add(400 * time.Millisecond), t0.Add(700 * time.Millisecond), 100 * time.Millisecond},
		{"window before it", t0.Add(100 * time.Millisecond), t0.Add(400 * time.Millisecond), 10 * time.Millisecond},
		{"window inside the pause", t0.Add(550 * time.Millisecond), t0.Add(560 * time.Millisecond), 100 * time.Millisecond},
		{"silent until the window's end", t0.Add(1000 * time.Millisecond), t0.Add(1500 * time.Millisecond), 410 * time.Millisecond},
	}
	for _, c := range cases {
		if got := longestGap(obs, c.from, c.to); got != c.want {
			t.Errorf("%s: longestGap = %s, want %s", c.name, got, c.want)
		}
	}
}

// demoInput is 4 partitions observed every 10 ms for 2 s, the join at
// 1 s; partition 3 moved (a pause of pause at the join); unmoved
// partition 0 gets extra.
func demoInput(pause, extra time.Duration) summaryInput {
	t0 := time.Unix(1000, 0)
	in := summaryInput{
		Observed: map[int32][]observation{}, Acked: map[int32][]int64{}, Moved: map[int32]bool{3: true},
		SteadyAt: t0, JoinAt: t0.Add(time.Second), WindowEnd: t0.Add(1500 * time.Millisecond),
		Partitions: 4, ExpectedMoves: 1, Tolerance: 50 * time.Millisecond,
	}
	for p := range int32(4) {
		gaps := map[int]time.Duration{}
		switch p {
		case 3:
			gaps[101] = pause - 10*time.Millisecond
		case 0:
			gaps[102] = extra
		}
		in.Observed[p] = timeline(t0, 10*time.Millisecond, 200, gaps)
		for i := range 200 {
			in.Acked[p] = append(in.Acked[p], int64(i))
		}
	}
	return in
}

func TestSummarizeHolds(t *testing.T) {
	s := summarize(demoInput(30*time.Millisecond, 0))
	if !s.ok() {
		t.Fatalf("failures: %v", s.Failures)
	}
	if len(s.Moved) != 1 || s.Moved[0] != 3 || s.MovedP50 != 30*time.Millisecond || s.MovedMax != 30*time.Millisecond {
		t.Fatalf("moved %v p50 %s max %s, want [3] 30ms 30ms", s.Moved, s.MovedP50, s.MovedMax)
	}
	if s.Unmoved != 3 || s.UnmovedMaxExtra != 0 || s.SteadyMax != 10*time.Millisecond {
		t.Fatalf("unmoved %d extra %s steady %s", s.Unmoved, s.UnmovedMaxExtra, s.SteadyMax)
	}
	if s.Produced != 800 || s.Consumed != 800 || s.Lost != 0 || s.Duplicates != 0 {
		t.Fatalf("accounting %+v", s)
	}
	var out bytes.Buffer
	s.print(&out, "demo")
	last := strings.TrimSpace(out.String())
	last = last[strings.LastIndex(last, "\n")+1:]
	want := "summary: moved=1 moved_p50_ms=30 moved_max_ms=30 unmoved_max_extra_ms=0 lost=0 duplicates=0 steady_max_ms=10 unmoved_max_ms=10 produced=800 consumed=800 ok=true"
	if last != want {
		t.Fatalf("last line\n got %s\nwant %s", last, want)
	}
}

func TestSummarizeFails(t *testing.T) {
	cases := []struct {
		name   string
		change func(*summaryInput)
		want   string
	}{
		{"unmoved partition paused", func(in *summaryInput) { *in = demoInput(30*time.Millisecond, 200*time.Millisecond) }, "unmoved partition paused 200 ms"},
		{"too many moved", func(in *summaryInput) { in.Moved[1] = true }, "2 partitions moved, want 1"},
		{"lost", func(in *summaryInput) { in.Acked[2] = append(in.Acked[2], 500) }, "1 acknowledged records were never consumed"},
		{"duplicate", func(in *summaryInput) {
			o := in.Observed[1]
			in.Observed[1] = append(o, observation{at: o[len(o)-1].at, offset: 7})
		}, "1 records were consumed more than once"},
	}
	for _, c := range cases {
		in := demoInput(30*time.Millisecond, 0)
		c.change(&in)
		s := summarize(in)
		if s.ok() || !strings.Contains(strings.Join(s.Failures, "; "), c.want) {
			t.Errorf("%s: failures %q, want one containing %q", c.name, s.Failures, c.want)
		}
	}
}
