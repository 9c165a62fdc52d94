package outage

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/internal/stack"
	"github.com/capgate/capgate/internal/timeline"
)

// The benchmarks run one scenario per b.N round (run them with
// -benchtime=1x) and report ratios against a baseline measured in the
// same run; the figures go to BENCHMARKS.md.

func binary(b *testing.B) string {
	b.Helper()
	bin, err := stack.BuildOnce("./cmd/capgate")
	if err != nil {
		b.Fatal(err)
	}
	return bin
}

const (
	quiet       = time.Second      // nothing moved for this long: settled
	settleLimit = 90 * time.Second // bound on every wait for the group
)

// BenchmarkRollingRestart: 2 gateway processes under load (3 consumers, a
// record per partition every 20 ms); each gateway in turn is stopped and
// started again while partitions move (a 4th consumer joins while the
// first gateway is down, leaves while the second is). "sigterm": the
// gateway leaves cleanly; "sigkill", the baseline of the same run: it
// does not, so every handoff waits gateway_timeout (shipped default 15s).
// Reported: moved partitions' pause beyond the steady state (max over
// both steps), unmoved ones', records lost.
func BenchmarkRollingRestart(b *testing.B) {
	bin := binary(b)
	for _, stop := range []string{"sigterm", "sigkill"} {
		b.Run(stop, func(b *testing.B) {
			for range b.N {
				steps := rollingRestart(b, bin, stop)
				var movedMax, unmovedMax time.Duration
				lost := 0
				for _, r := range steps {
					b.Log(r)
					movedMax, unmovedMax = max(movedMax, r.MovedExtra.Max), max(unmovedMax, r.UnmovedExtra.Max)
					lost = max(lost, r.Lost)
				}
				b.ReportMetric(float64(movedMax.Milliseconds()), "moved-extra-max-ms")
				b.ReportMetric(float64(unmovedMax.Milliseconds()), "unmoved-extra-max-ms")
				b.ReportMetric(float64(lost), "lost")
			}
		})
	}
}

func rollingRestart(b *testing.B, bin, stop string) []stepResult {
	w := startWorld(b, stack.Options{Gateways: 2, GatewayProcesses: true, Binary: bin})
	for _, n := range []string{"m1", "m2", "m3"} {
		w.add(n)
	}
	steadyFrom, ok := w.settled(quiet, settleLimit)
	if !ok {
		b.Fatal("group never settled")
	}
	time.Sleep(3 * time.Second) // the steady-state baseline is wall-clock by design
	var out []stepResult
	for i, gw := range w.s.Gateways() {
		from := time.Now()
		if stop == "sigterm" {
			if err := gw.Stop(); err != nil {
				b.Fatal(err)
			}
		} else {
			gw.Kill()
		}
		if i == 0 {
			w.add("m4")
		} else {
			w.remove("m4")
		}
		end, ok := w.settled(quiet, settleLimit)
		if !ok {
			b.Fatalf("step %d: group never settled", i)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := gw.Start(ctx)
		if err == nil {
			err = gw.WaitReady(ctx)
		}
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, w.analyze(fmt.Sprintf("%s %s", stop, gw.ID), steadyFrom, from, end))
		// The next step's steady state is measured after this one.
		if steadyFrom, ok = w.settled(quiet, settleLimit); !ok {
			b.Fatalf("step %d: group never settled after the restart", i)
		}
		time.Sleep(3 * time.Second)
	}
	w.prod.Stop()
	if !w.drained(time.Minute) {
		b.Log("not every acknowledged record was delivered within a minute")
	}
	last := w.analyze("drained", steadyFrom, time.Now(), time.Now())
	for i := range out {
		out[i].Lost, out[i].Produced = last.Lost, last.Produced
	}
	return out
}

// silentGateways sets the coordinator's groups.silent_gateways.
func silentGateways(mode string) func(int, *coordinator.Config) {
	return func(_ int, c *coordinator.Config) { c.Groups.SilentGateways = mode }
}

// BenchmarkCoordinatorOutage: the only coordinator stops for 30 s while 3
// consumers read through 2 gateway processes, then starts again on its
// data. Reported per mode: every partition's pause (timeline.Pause) from
// the stop until the group settled again, p50 and max, and beyond its
// steady gap before the stop — the data outage. fence: gateways refuse
// everything sync_timeout (10 s) after their last good poll; serve: they
// keep serving unexpired capabilities.
func BenchmarkCoordinatorOutage(b *testing.B) {
	bin := binary(b)
	for _, mode := range []string{group.SilentGatewaysFence, group.SilentGatewaysServe} {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				o := coordinatorOutage(b, bin, mode, 30*time.Second)
				b.Logf("%s: %s", mode, o)
				b.ReportMetric(o.p50.Seconds(), "outage-p50-s")
				b.ReportMetric(o.max.Seconds(), "outage-max-s")
				b.ReportMetric(o.extraMax.Seconds(), "outage-extra-max-s")
				b.ReportMetric(float64(o.lost), "lost")
			}
		})
	}
}

// outageResult is every partition's pause over an outage window.
type outageResult struct {
	p50, max, extraMax time.Duration
	lost, produced     int
}

func (o outageResult) String() string {
	return fmt.Sprintf("partition pause p50 %s max %s (beyond steady max %s); lost %d of %d", o.p50, o.max, o.extraMax, o.lost, o.produced)
}

func coordinatorOutage(b *testing.B, bin, mode string, outage time.Duration) outageResult {
	w := startWorld(b, stack.Options{Gateways: 2, GatewayProcesses: true, Binary: bin, Coordinator: silentGateways(mode)})
	// No periodic commit: a synchronous Commit holds the poll loop while
	// no coordinator answers, which would measure the application's loop,
	// not what the gateways serve.
	w.commitEvery = 0
	for _, n := range []string{"m1", "m2", "m3"} {
		w.add(n)
	}
	steadyFrom, ok := w.settled(quiet, settleLimit)
	if !ok {
		b.Fatal("group never settled")
	}
	time.Sleep(3 * time.Second)
	co := w.s.Coordinator()
	from := time.Now()
	if err := co.Stop(); err != nil {
		b.Fatal(err)
	}
	time.Sleep(outage) // the outage is wall-clock by design
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := co.Start(ctx); err != nil {
		b.Fatal(err)
	}
	end, ok := w.settled(quiet, settleLimit)
	if !ok {
		b.Log("group never settled after the outage")
	}
	tl := w.rec.Timeline(partitions)
	var all []time.Duration
	var o outageResult
	for p := range partitions {
		pause := timeline.Pause(tl.Deliveries[p], from, end)
		all = append(all, pause)
		o.extraMax = max(o.extraMax, pause-timeline.SteadyGap(tl.Deliveries[p], steadyFrom, from))
	}
	slices.Sort(all)
	o.p50, o.max = all[(len(all)-1)/2], all[len(all)-1]
	w.prod.Stop()
	w.drained(time.Minute)
	last := w.analyze("drained", steadyFrom, time.Now(), time.Now())
	o.lost, o.produced = last.Lost, last.Produced
	return o
}

// BenchmarkHandoffGatewayCutOff: gateway 2's sync path goes through a TCP
// proxy that is blackholed (the gateway keeps serving consumers); then an
// admin revoke of one partition. Reported per mode: how long the revoke
// waited for gateway safety. fence: until the cut-off gateway counts as
// silent (gateway_timeout, 15 s); serve: until the revoked holder's
// capabilities expired (up to capability_lease 60 s + leeway + skew).
func BenchmarkHandoffGatewayCutOff(b *testing.B) {
	for _, mode := range []string{group.SilentGatewaysFence, group.SilentGatewaysServe} {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				took := handoffCutOff(b, mode)
				b.Logf("%s: revoke with one gateway cut off answered after %s", mode, took)
				b.ReportMetric(took.Seconds(), "revoke-s")
			}
		})
	}
}

func handoffCutOff(b *testing.B, mode string) time.Duration {
	w := startWorld(b, stack.Options{Gateways: 1, Coordinator: silentGateways(mode)})
	proxy, err := stack.StartProxy(w.s.Coordinator().Addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(proxy.Close)
	gw, err := w.s.NewGateway()
	if err != nil {
		b.Fatal(err)
	}
	gw.SetCoordinatorURL(proxy.URL())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := gw.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if err := gw.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	for _, n := range []string{"m1", "m2", "m3"} {
		w.add(n)
	}
	if _, ok := w.settled(quiet, settleLimit); !ok {
		b.Fatal("group never settled")
	}
	proxy.Blackhole()
	took, err := w.revoke(0)
	if err != nil {
		b.Fatal(err)
	}
	return took
}
