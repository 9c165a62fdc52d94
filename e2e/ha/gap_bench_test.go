package ha

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
)

// gapRound is one fault of the leading replica as the members saw it.
type gapRound struct {
	Mode, Faulted, Next string
	Delay               time.Duration // the seeded wait before the fault
	// Leads: fault → another replica says it leads (its /readyz, asked
	// every few ms). Takeover: fault → the probe's first heartbeat
	// answered among those sent after the fault (the probe gives up a
	// heartbeat after 2 s: a paused leader's is counted from there).
	Leads, Takeover time.Duration
	// MembersBack: fault → every member had a heartbeat answered 200 that
	// it sent after the fault.
	MembersBack time.Duration
	// Gap: the worst member's longest time without a fetch answered 200
	// (any of its partitions) from the fault until the round's end;
	// Steady: the same over the 2 s before the fault.
	Gap, Steady time.Duration
	Refused     int // fetches answered 503 since the fault
}

// BenchmarkFailoverGap measures what "a single replica's failure never
// stops a fetch" leaves of a fetch: three replicas, two gateway
// processes, two members keeping the SDK's default request_timeout
// (10 s) under a steady stream; the leading replica is killed (-9) or
// paused (SIGSTOP, resumed once the members heartbeat the new leader),
// `rounds` times each, at a moment drawn from a seeded source
// (CAPGATE_FAILOVER_SEED, default 1; printed). Per round: takeover,
// members back (their heartbeats answered by the new leader), and the
// fetch gap — each member's longest time without a fetch answered 200,
// the worst member's — against the same measure in the steady spell
// before. Reported, not asserted; every checker runs over each run.
//
//	go test ./e2e/ha/ -run '^$' -bench FailoverGap -benchtime 1x
func BenchmarkFailoverGap(b *testing.B) {
	seed := uint64(1)
	if v := os.Getenv("CAPGATE_FAILOVER_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			b.Fatalf("CAPGATE_FAILOVER_SEED: %v", err)
		}
		seed = n
	}
	rounds := 5
	if testing.Short() {
		rounds = 2
	}
	for range b.N {
		for _, mode := range []string{"kill", "pause"} {
			rs, checked := gapRun(b, mode, rounds, rand.New(rand.NewPCG(seed, 0)))
			gapTable(b, mode, seed, rs, checked)
		}
	}
	b.ReportMetric(0, "ns/op")
}

func gapRun(b *testing.B, mode string, rounds int, rng *rand.Rand) ([]gapRound, string) {
	group := "gap-" + mode
	c := startHA(b, group, nil, func(cfg *coordinator.Config) { cfg.KafkaState.Timeout = 5 * time.Minute })
	prod := c.StartProducer(b, produceEvery)
	members := []*harness.Member{
		c.StartMember(b, harness.MemberOptions{Name: "a", Group: group, RequestTimeout: 10 * time.Second}),
		c.StartMember(b, harness.MemberOptions{Name: "b", Group: group, RequestTimeout: 10 * time.Second}),
	}
	c.WaitSettled(b, group, 2)
	p := startProbe(b, c, "probe-"+group)
	c.WaitFlowing(b, group, 200)
	var out []gapRound
	for range rounds {
		r := gapRound{Mode: mode, Delay: 2*time.Second + time.Duration(rng.IntN(1000))*time.Millisecond}
		time.Sleep(r.Delay) // a steady spell, its length seeded: where the fault lands
		lead := leaderAmong(b, c)
		r.Faulted = lead.Name
		at, wall := harness.Now(), time.Now()
		if mode == "kill" {
			lead.Kill(b)
		} else {
			lead.Pause(b)
		}
		r.Next = leaderAmong(b, c, lead).Name
		r.Leads = time.Duration(harness.Now() - at)
		harness.Eventually(b, harness.Wait, "a coordinator answers heartbeats", func() (bool, string) {
			back := p.firstSentAfter(wall)
			r.Takeover = back.Sub(wall)
			return !back.IsZero(), "none yet"
		})
		heartbeatsAfter(b, c, at, members...)
		r.MembersBack = time.Duration(harness.Now() - at)
		c.WaitFlowing(b, group, 100)
		end := harness.Now()
		s := c.Log.Snapshot()
		for _, m := range members {
			r.Gap = max(r.Gap, gapBetween(s, m.Name, at, end))
			r.Steady = max(r.Steady, gapBetween(s, m.Name, at-harness.Time(2*time.Second), at))
		}
		for _, f := range s.ClientFetches {
			if f.Sent >= at && f.Status == 503 {
				r.Refused++
			}
		}
		if mode == "kill" {
			lead.Restart(b)
		} else {
			resumed := harness.Now()
			lead.Resume(b)
			stepDown(b, c, lead, resumed)
		}
		out = append(out, r)
	}
	prod.Stop()
	c.WaitDelivered(b, group, harness.Wait)
	checked := "every checker held"
	if v := harness.CheckAll(c.Log.Snapshot(), c.Params()); len(v) > 0 {
		checked = fmt.Sprintf("%d violations, first: %s", len(v), v[0])
	}
	return out, checked
}

func gapTable(b *testing.B, mode string, seed uint64, rs []gapRound, checked string) {
	fmt.Printf("\nleader %s, seed %d: %s\n", mode, seed, checked)
	fmt.Println("| round | delay | faulted → next | new leader leads | probe answered | members back | fetch gap (steady before) | 503s |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	var leads, backs, gaps []time.Duration
	for i, r := range rs {
		leads, backs, gaps = append(leads, r.Leads), append(backs, r.MembersBack), append(gaps, r.Gap)
		fmt.Printf("| %d | %s | %s → %s | %s | %s | %s | %s (%s) | %d |\n", i+1, ms(r.Delay), r.Faulted, r.Next, ms(r.Leads), ms(r.Takeover), ms(r.MembersBack), ms(r.Gap), ms(r.Steady), r.Refused)
	}
	for _, ds := range [][]time.Duration{leads, backs, gaps} {
		slices.Sort(ds)
	}
	if n := len(rs); n > 0 {
		fmt.Printf("leads p50 %s max %s; members back p50 %s max %s; fetch gap p50 %s max %s\n",
			ms(leads[(n-1)/2]), ms(leads[n-1]), ms(backs[(n-1)/2]), ms(backs[n-1]), ms(gaps[(n-1)/2]), ms(gaps[n-1]))
	}
	_ = b
}
