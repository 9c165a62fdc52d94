package ha

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/internal/timeline"
)

// failoverRound is one kill -9 of the leading coordinator while a
// handoff is in flight, as the clients saw it.
type failoverRound struct {
	Killed, Next string
	// Takeover: kill → the first heartbeat a coordinator answered again
	// (the probe's, every 20 ms).
	Takeover time.Duration
	// InFlight: the newcomer had been told nothing yet (a revoke was out,
	// no grant to it) when the kill came.
	InFlight bool
	// HandoffDone: kill → the group settled with the newcomer.
	HandoffDone time.Duration
	// RefusedCodes: the codes of those 503s (out_of_sync: the gateway
	// lost its coordinator; unavailable: a broker call failed).
	RefusedCodes []string
	// Refused: fetches the gateways answered 503 from the kill until the
	// group settled, of Fetches.
	Refused, Fetches int
	// UnmovedExtra: the worst pause beyond its steady state of the
	// partitions that kept their holder (timeline.Pause over the kill →
	// settled window, minus timeline.SteadyGap over the 5 s before).
	UnmovedExtra time.Duration
	// CommitBack: kill → the first commit of a member, sent after the
	// killed process was reaped, that a coordinator accepted (a member
	// committing synchronously delivers nothing until then); 0: none
	// before the group settled.
	CommitBack time.Duration
}

// failoverRun is one deployment's rounds and the record accounting of
// the whole run (every checker ran over it).
type failoverRun struct {
	Name                 string
	Rounds               []failoverRound
	Produced, Duplicates int
	CheckersHeld         bool
	LostOrViolations     string
}

// runFailover starts a deployment (replicas 3: the replicas; 1: today's
// single coordinator on badger, restarted restartAfter after the kill —
// at once by a supervisor, or later by an operator) with two members
// under a steady stream and runs rounds kills, each while a third
// member's handoff is in flight. The members commit every 100 ms with
// CommitAsync (stack.Consumer's loop), or with the synchronous Commit
// when syncCommit.
func runFailover(tb testing.TB, name string, replicas int, restartAfter time.Duration, rounds int, syncCommit bool) failoverRun {
	group := "failover-" + strings.NewReplacer(" ", "-", ",", "").Replace(name)
	opts := harness.Options{
		Partitions: 6, Brokers: 3, Gateways: 2, Coordinators: replicas, Groups: []string{group},
		CoordinatorProcess: true, GatewayProcesses: true, Binaries: binaries, Timing: haTiming(),
	}
	c := harness.Start(tb, opts)
	prod := c.StartProducer(tb, produceEvery)
	a := c.StartMember(tb, harness.MemberOptions{Name: "a", Group: group, SyncCommit: syncCommit})
	b := c.StartMember(tb, harness.MemberOptions{Name: "b", Group: group, SyncCommit: syncCommit})
	c.WaitSettled(tb, group, 2)
	p := startProbe(tb, c, "probe-"+group)
	c.WaitFlowing(tb, group, 200)
	run := failoverRun{Name: name}
	for i := range rounds {
		time.Sleep(5 * time.Second) // a steady spell: the baseline of the pause
		run.Rounds = append(run.Rounds, failoverOnce(tb, c, p, group, replicas, restartAfter, fmt.Sprintf("n%d", i), syncCommit, a, b))
	}
	s := c.Finish(tb, prod, group)
	run.Produced = len(s.Produced)
	if v := harness.CheckAll(s, c.Params()); len(v) == 0 {
		run.CheckersHeld = true
	} else {
		run.LostOrViolations = fmt.Sprint(v)
	}
	for _, v := range harness.CheckDuplicates(s, c.Params()) {
		run.LostOrViolations += v.String()
	}
	seen := map[string]bool{}
	for _, d := range s.Deliveries {
		k := fmt.Sprintf("%s/%d", d.Key, d.Offset)
		if seen[k] {
			run.Duplicates++
		}
		seen[k] = true
	}
	return run
}

// failoverOnce: newcomer joins; at the first revoke its join caused, the
// leader is killed (-9); the round ends when the group settled with the
// newcomer, which then leaves again.
func failoverOnce(tb testing.TB, c *harness.Cluster, p *probe, group string, replicas int, restartAfter time.Duration, name string, syncCommit bool, holders ...*harness.Member) failoverRound {
	lead := c.Replicas[0]
	if replicas > 1 {
		lead = leaderAmong(tb, c)
	}
	before, _ := c.Owners(group, 2)
	joinAt := harness.Now()
	m := c.StartMember(tb, harness.MemberOptions{Name: name, Group: group, SyncCommit: syncCommit})
	harness.Eventually(tb, harness.Wait, "a revoke for "+name, func() (bool, string) {
		for _, r := range c.Log.Snapshot().Revokes {
			if r.At >= joinAt && slices.ContainsFunc(holders, func(h *harness.Member) bool { return h.MemberID() == r.Member }) {
				return true, ""
			}
		}
		return false, "no revoke yet"
	})
	killAt, kill := harness.Now(), time.Now()
	inFlight := !slices.ContainsFunc(c.Log.Snapshot().Grants, func(g harness.Grant) bool { return g.Member == m.MemberID() && g.At >= joinAt })
	lead.Kill(tb)
	dead, deadAt := time.Now(), harness.Now() // the process is gone: later heartbeats reach another, or the restarted one
	r := failoverRound{Killed: lead.Name, InFlight: inFlight}
	if replicas == 1 {
		time.Sleep(restartAfter) // the supervisor (or the operator) restarts it
		lead.Restart(tb)
		r.Next = lead.Name
	} else {
		r.Next = leaderAmong(tb, c, lead).Name
	}
	harness.Eventually(tb, harness.Wait, "a coordinator answers heartbeats", func() (bool, string) {
		at := p.firstSentAfter(dead)
		r.Takeover = at.Sub(kill)
		return !at.IsZero(), "no heartbeat answered since the kill"
	})
	after := c.WaitSettled(tb, group, 3)
	settled := harness.Now()
	r.HandoffDone = time.Duration(settled - killAt)
	s := c.Log.Snapshot()
	for _, f := range s.ClientFetches {
		if f.Sent >= killAt && f.Sent <= settled {
			r.Fetches++
			if f.Status == 503 {
				r.Refused++
				if !slices.Contains(r.RefusedCodes, f.Code) {
					r.RefusedCodes = append(r.RefusedCodes, f.Code)
				}
			}
		}
	}
	r.UnmovedExtra = unmovedExtra(s, group, before, after, killAt, settled)
	r.CommitBack = commitBack(s, killAt, deadAt)
	if replicas > 1 {
		lead.Restart(tb) // back as a follower
	}
	m.Close(tb)
	c.WaitSettled(tb, group, 2)
	return r
}

// commitBack: kill → the first commit answered 200 that was sent after
// the killed process was reaped at dead (0: none by the end of the
// round).
func commitBack(s harness.Snapshot, kill, dead harness.Time) time.Duration {
	var first harness.Time
	for _, call := range s.Calls {
		if call.Op == "commit" && call.Status == 200 && call.Sent >= dead && (first == 0 || call.Done < first) {
			first = call.Done
		}
	}
	if first == 0 {
		return 0
	}
	return first.Sub(kill)
}

// unmovedExtra is the worst pause beyond steady state over [from, to] of
// the partitions whose holder did not change.
func unmovedExtra(s harness.Snapshot, group string, before, after map[string][]int32, from, to harness.Time) time.Duration {
	holder := func(own map[string][]int32, p int32) string {
		for m, ps := range own {
			if slices.Contains(ps, p) {
				return m
			}
		}
		return ""
	}
	at := func(t harness.Time) time.Time { return time.Unix(0, int64(t)) }
	var worst time.Duration
	for p := range int32(6) {
		if h := holder(before, p); h == "" || h != holder(after, p) {
			continue
		}
		var ds []timeline.Delivery
		for _, d := range s.Deliveries {
			if d.Key.Group == group && d.Key.Partition == p {
				ds = append(ds, timeline.Delivery{At: at(d.At), Offset: d.Offset, Member: d.Member})
			}
		}
		extra := timeline.Pause(ds, at(from), at(to)) - timeline.SteadyGap(ds, at(from).Add(-5*time.Second), at(from))
		worst = max(worst, extra)
	}
	return worst
}

// BenchmarkFailover: kill -9 of the leading coordinator while a handoff
// is in flight, 5 rounds each, three replicas on the Kafka log side by
// side with today's single coordinator (badger) in the same run —
// restarted at once by a supervisor (its best case), and restarted after
// 10 s (an operator; one round) — and three replicas again with members
// that commit synchronously (what they did before CommitAsync).
// Reported, not asserted (BENCHMARKS.md §9).
func BenchmarkFailover(b *testing.B) {
	rounds := 5
	if testing.Short() {
		rounds = 2
	}
	var runs []failoverRun
	for range b.N {
		runs = append(runs,
			runFailover(b, "single coordinator, restarted at once", 1, 0, rounds, false),
			runFailover(b, "single coordinator, restarted after 10 s", 1, 10*time.Second, 1, false),
			runFailover(b, "3 replicas", 3, 0, rounds, false),
			runFailover(b, "3 replicas, members committing with the synchronous Commit", 3, 0, rounds, true))
	}
	b.ReportMetric(0, "ns/op")
	failoverTable(os.Stdout, runs)
}

// failoverTable prints each run's rounds and their quantiles.
func failoverTable(w io.Writer, runs []failoverRun) {
	for _, run := range runs {
		fmt.Fprintf(w, "\n%s: %d records produced, %d duplicate deliveries, checkers held: %t %s\n", run.Name, run.Produced, run.Duplicates, run.CheckersHeld, run.LostOrViolations)
		fmt.Fprintln(w, "| round | killed → next | takeover | handoff in flight | handoff done after kill | 503s / fetches | unmoved pause beyond steady | first commit accepted after kill |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
		var takeovers []time.Duration
		for i, r := range run.Rounds {
			takeovers = append(takeovers, r.Takeover)
			refused := fmt.Sprintf("%d / %d", r.Refused, r.Fetches)
			if len(r.RefusedCodes) > 0 {
				refused += " (" + strings.Join(r.RefusedCodes, ", ") + ")"
			}
			back := "none before settled"
			if r.CommitBack > 0 {
				back = ms(r.CommitBack)
			}
			fmt.Fprintf(w, "| %d | %s → %s | %s | %t | %s | %s | %s | %s |\n", i+1, r.Killed, r.Next, ms(r.Takeover), r.InFlight, ms(r.HandoffDone), refused, ms(r.UnmovedExtra), back)
		}
		slices.Sort(takeovers)
		if n := len(takeovers); n > 0 {
			fmt.Fprintf(w, "takeover p50 %s, max %s\n", ms(takeovers[(n-1)/2]), ms(takeovers[n-1]))
		}
	}
}

func ms(d time.Duration) string {
	return strings.TrimSuffix(fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)), "")
}
