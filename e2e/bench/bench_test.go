package bench

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

// The side-by-side benchmarks. Each scenario is one iteration (run them
// with -benchtime=1x, or 2x for two runs in one go); every metric is
// reported with b.ReportMetric, ns/op is suppressed, and a table with all
// runs and the ratios against the baseline of the same run goes to stdout.
// -short shrinks every scenario (a CI-sized variant).

// sizes are the knobs of every scenario.
type sizes struct {
	kgoHeartbeat       time.Duration // classic protocols; 0 = kgo default (3s)
	rebalanceBaseline  time.Duration
	rebalanceQuiet     time.Duration
	slowBaseline       time.Duration
	slow               slowness
	overhead           overheadSize
	rates              []float64
	rateFor            time.Duration
	sequential         int // 1-record fetches per path
	scanPasses         int // consumer passes per reader, best kept
	revokeGateways     []int
	revokes            int
	bulkPartitions     int
	scale              scaleParams
	skipSlowHeartbeats bool // leave out KIP-848 with a 5s heartbeat
}

func benchSizes() sizes {
	if testing.Short() {
		return sizes{
			kgoHeartbeat: 300 * time.Millisecond, rebalanceBaseline: time.Second, rebalanceQuiet: 500 * time.Millisecond,
			slowBaseline: 1500 * time.Millisecond, slow: slowness{Min: 200 * time.Millisecond, Max: 600 * time.Millisecond, Seed: 1},
			overhead: overheadSize{LatencyRecords: 200, ThroughputParts: 4, ThroughputPerPart: 10_000, ThroughputValueSize: 100},
			rates:    []float64{500, 2000}, rateFor: 500 * time.Millisecond, sequential: 500, scanPasses: 1,
			revokeGateways: []int{1, 4}, revokes: 30, bulkPartitions: 1000,
			scale:              scaleParams{Members: 100, Partitions: 1000, Joiners: 32, HeartbeatFor: 500 * time.Millisecond, Timeout: 30 * time.Second},
			skipSlowHeartbeats: true,
		}
	}
	return sizes{
		rebalanceBaseline: 2 * time.Second, rebalanceQuiet: time.Second,
		slowBaseline: 3 * time.Second, slow: slowness{Min: 500 * time.Millisecond, Max: 1500 * time.Millisecond, Seed: 1},
		overhead: overheadSize{LatencyRecords: 2000, ThroughputParts: 4, ThroughputPerPart: 100_000, ThroughputValueSize: 100},
		rates:    []float64{500, 2000, 5000}, rateFor: 3 * time.Second, sequential: 5000, scanPasses: 2,
		revokeGateways: []int{1, 4, 16}, revokes: 200, bulkPartitions: 10_000,
		scale: scaleParams{Members: 1000, Partitions: 10_000, Joiners: 100, HeartbeatFor: 3 * time.Second, Timeout: 2 * time.Minute, SettleHeap: true},
	}
}

func (z sizes) protocols() []protocol {
	ps := protocols(z.kgoHeartbeat)
	if z.skipSlowHeartbeats {
		ps = slices.DeleteFunc(ps, func(p protocol) bool { return p.Name == "kip848-hb5s" })
	}
	return ps
}

func (z sizes) rebalance(proto protocol, slow bool) rebalanceParams {
	p := rebalanceParams{Protocol: proto, Partitions: 12, Members: 3, Interval: 10 * time.Millisecond,
		Baseline: z.rebalanceBaseline, Quiet: z.rebalanceQuiet, Settle: 100 * time.Millisecond, Timeout: 60 * time.Second}
	if slow {
		p.Slow, p.Baseline = z.slow, z.slowBaseline
		p.Quiet = max(p.Quiet, z.slow.Max+500*time.Millisecond)
	}
	return p
}

// BenchmarkRebalance: 3 members consume 12 partitions, a 4th joins; the
// pause of moved and unmoved partitions, duplicates, and time to stable,
// for Kafka's protocols (franz-go group consumers) and capgate.
func BenchmarkRebalance(b *testing.B) { benchmarkRebalance(b, false) }

// BenchmarkRebalanceSlow: the same with one member taking 0.5–1.5 s
// (seeded) to process each poll.
func BenchmarkRebalanceSlow(b *testing.B) { benchmarkRebalance(b, true) }

func benchmarkRebalance(b *testing.B, slow bool) {
	z := benchSizes()
	var runs []rebalanceRun
	for _, proto := range z.protocols() {
		b.Run(proto.Name, func(b *testing.B) {
			var mine []rebalanceRun
			for range b.N {
				r := runRebalance(b, z.rebalance(proto, slow))
				if os.Getenv("CAPGATE_BENCH_DETAIL") != "" {
					partitionTable(os.Stdout, r)
				}
				mine = append(mine, r)
			}
			reportRebalance(b, mine)
			runs = append(runs, mine...)
		})
	}
	title := "Rebalance: 3 members + 1 joining, 12 partitions, 1 record/partition/10 ms"
	if slow {
		title += fmt.Sprintf(", member m1 slow (%s–%s per poll)", z.slow.Min, z.slow.Max)
	}
	rebalanceTable(os.Stdout, title, runs)
}

// reportRebalance reports the mean of the runs of one protocol.
func reportRebalance(b *testing.B, runs []rebalanceRun) {
	mean := func(f func(rebalanceRun) float64) float64 {
		total := 0.0
		for _, r := range runs {
			total += f(r)
		}
		return total / float64(len(runs))
	}
	msOf := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(mean(func(r rebalanceRun) float64 { return msOf(r.MovedPause.P50) }), "moved-pause-p50-ms")
	b.ReportMetric(mean(func(r rebalanceRun) float64 { return msOf(r.MovedPause.Max) }), "moved-pause-max-ms")
	b.ReportMetric(mean(func(r rebalanceRun) float64 { return msOf(r.MovedExtra.P50) }), "moved-beyond-p50-ms")
	b.ReportMetric(mean(func(r rebalanceRun) float64 { return msOf(r.MovedExtra.Max) }), "moved-beyond-max-ms")
	b.ReportMetric(mean(func(r rebalanceRun) float64 { return msOf(r.UnmovedExtra.P50) }), "unmoved-beyond-p50-ms")
	b.ReportMetric(mean(func(r rebalanceRun) float64 { return msOf(r.UnmovedExtra.Max) }), "unmoved-beyond-max-ms")
	b.ReportMetric(mean(func(r rebalanceRun) float64 { return msOf(r.JoinToStable) }), "stable-ms")
	b.ReportMetric(mean(func(r rebalanceRun) float64 { return msOf(r.NewcomerFirst) }), "newcomer-ms")
	b.ReportMetric(mean(func(r rebalanceRun) float64 { return float64(r.Duplicates) }), "dups")
	b.ReportMetric(mean(func(r rebalanceRun) float64 { return float64(r.Lost) }), "lost")
	for _, r := range runs {
		if !r.Stable {
			b.Logf("%s: the group never settled again", r.Params.Protocol.Name)
		}
		if r.ProduceFailures > 0 {
			b.Logf("%s: %d produce requests failed", r.Params.Protocol.Name, r.ProduceFailures)
		}
	}
}

// BenchmarkGateway: one stack, the gateway next to franz-go fetching
// directly from the same kfake: open-loop 1-record fetches at fixed rates,
// sequential 1-record fetches, and records/s to one consumer (raw record
// batches and JSON through the SDK versus a franz-go consumer).
func BenchmarkGateway(b *testing.B) {
	z := benchSizes()
	e := startOverhead(b, z.overhead)
	var rows []loadRow
	for _, rate := range z.rates {
		for _, path := range []string{"direct", "gateway"} {
			b.Run("open-loop/rate="+strconv.Itoa(int(rate))+"/"+path, func(b *testing.B) {
				do := e.directFetch(false)
				if path == "gateway" {
					do = e.gatewayFetch(false)
				}
				var last loadResult
				for range b.N {
					last = openLoop(rate, z.rateFor, 512, do)
					rows = append(rows, loadRow{Path: path, loadResult: last})
				}
				if last.FirstFail != nil {
					b.Errorf("%d failed, first: %v", last.Failed, last.FirstFail)
				}
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(float64(last.P50.Nanoseconds())/1e3, "p50-µs")
				b.ReportMetric(float64(last.P99.Nanoseconds())/1e3, "p99-µs")
				b.ReportMetric(last.Achieved, "req/s")
			})
		}
	}
	loadTable(os.Stdout, rows)
	benchmarkSequential(b, e, z.sequential)
	benchmarkThroughput(b, e, z.scanPasses)
}

// benchmarkSequential: n fetches one after another per path and iteration.
func benchmarkSequential(b *testing.B, e *overheadEnv, n int) {
	paths := []struct {
		name string
		do   fetchOne
	}{
		{"direct-decoded", e.directFetch(false)}, {"gateway-json", e.gatewayFetch(false)},
		{"direct-raw", e.directFetch(true)}, {"gateway-raw", e.gatewayFetch(true)},
	}
	p50s := map[string]time.Duration{}
	var rows [][]string
	for _, path := range paths {
		b.Run("sequential/"+path.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, n*b.N)
			for i := range n * b.N {
				start := time.Now()
				if err := path.do(i); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			p50, p99, _ := quantiles(lat)
			p50s[path.name] = p50
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(p50.Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(p99.Nanoseconds())/1e3, "p99-µs")
			rows = append(rows, []string{path.name, fmt.Sprint(len(lat)), us(p50), us(p99)})
		})
	}
	table(os.Stdout, "Sequential 1-record fetches", []string{"path", "fetches", "p50 µs", "p99 µs"}, rows)
	fmt.Printf("gateway JSON p50 over direct decoded: %s µs; gateway raw p50 over direct raw: %s µs\n",
		us(p50s["gateway-json"]-p50s["direct-decoded"]), us(p50s["gateway-raw"]-p50s["direct-raw"]))
}

// benchmarkThroughput: passes scans per reader and iteration, best kept.
func benchmarkThroughput(b *testing.B, e *overheadEnv, passes int) {
	rates := map[string]float64{}
	scans := []struct {
		name string
		scan func() float64
	}{
		{"direct-franz-go", func() float64 { return e.scanDirect(b) }},
		{"capgate-raw", func() float64 { return e.scanCapgate(b, true) }},
		{"capgate-json", func() float64 { return e.scanCapgate(b, false) }},
	}
	for _, s := range scans {
		b.Run("consumer/"+s.name, func(b *testing.B) {
			best := 0.0
			for range passes * b.N {
				best = max(best, s.scan())
			}
			rates[s.name] = best
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(best, "records/s")
			if d := rates["direct-franz-go"]; d > 0 && s.name != "direct-franz-go" {
				b.ReportMetric(best/d, "x-direct")
			}
		})
	}
	records := int(e.throughputN) * e.perPart
	var rows [][]string
	for _, s := range scans {
		rows = append(rows, []string{s.name, fmt.Sprintf("%.3g", rates[s.name]), ratio(rates[s.name], rates["direct-franz-go"])})
	}
	table(os.Stdout, fmt.Sprintf("One consumer reads %d records of %d bytes from %d partitions (best pass)", records, e.valueSize, e.throughputN),
		[]string{"reader", "records/s", "x direct"}, rows)
}

// BenchmarkRevocation: an admin partition revoke answers once every
// gateway acknowledged the fence; with 1, 4 and 16 gateways, and a bulk
// fence (a member holding 10,000 partitions revoked at once).
func BenchmarkRevocation(b *testing.B) {
	z := benchSizes()
	var results []revokeResult
	for _, gateways := range z.revokeGateways {
		b.Run("gateways="+strconv.Itoa(gateways), func(b *testing.B) {
			var r revokeResult
			for range b.N {
				r = runRevoke(b, revokeParams{Gateways: gateways, Revokes: z.revokes, BulkPartitions: z.bulkPartitions})
				results = append(results, r)
			}
			msOf := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(msOf(r.P50), "revoke-p50-ms")
			b.ReportMetric(msOf(r.P99), "revoke-p99-ms")
			b.ReportMetric(msOf(r.BaseP50), "admin-p50-ms")
			b.ReportMetric(float64(r.P50)/float64(r.BaseP50), "x-admin")
			b.ReportMetric(msOf(r.BulkAcked), "bulk-acked-ms")
		})
	}
	var rows [][]string
	for _, r := range results {
		rows = append(rows, []string{fmt.Sprint(r.Gateways), ms(r.P50), ms(r.P99), ms(r.Max), ms(r.BaseP50), ms(r.BaseP99),
			ratio(float64(r.P50), float64(r.BaseP50)), fmt.Sprint(r.BulkFenced), ms(r.BulkAnswer), ms(r.BulkAcked)})
	}
	table(os.Stdout, fmt.Sprintf("Revocation propagation (%d single revokes; bulk: one member holding %d partitions)", z.revokes, z.bulkPartitions),
		[]string{"gateways", "revoke p50 ms", "p99 ms", "max ms", "admin GET p50 ms", "p99 ms", "x admin", "bulk fenced", "bulk answer ms", "bulk all acked ms"}, rows)
	rows = nil
	for _, r := range results {
		st := r.BulkStages
		rows = append(rows, []string{fmt.Sprint(r.Gateways), ms(r.BulkAnswer), fmt.Sprintf("%s (%d)", ms(st.Persist), st.PersistN),
			ms(st.FirstApplied), ms(st.LastApplied), ms(st.LastAck), ms(r.BulkAcked), fmt.Sprintf("%s (%d)", ms(st.After), st.AfterN)})
	}
	table(os.Stdout, "Bulk fence: where the time went (ms from the admin call; fenceStages in revoke_stages.go)",
		[]string{"gateways", "admin answer", "of it persist (updates)", "first gateway applied", "last gateway applied", "last ack at the coordinator", "all acked, read back", "persist after the answer (updates)"}, rows)
}

// BenchmarkCoordinatorScale: 1,000 members join a group of 10,000
// partitions over HTTP and release what is revoked at once.
func BenchmarkCoordinatorScale(b *testing.B) {
	z := benchSizes()
	var rows [][]string
	for range b.N {
		r := runScale(b, z.scale)
		mb := func(n uint64) float64 { return float64(n) / (1 << 20) }
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(float64(r.Stable.Milliseconds()), "stable-ms")
		b.ReportMetric(float64(r.JoinedAll.Milliseconds()), "joined-ms")
		b.ReportMetric(r.Heartbeats, "heartbeats/s")
		b.ReportMetric(r.Heartbeats/r.Healthz, "x-healthz")
		b.ReportMetric(mb(r.HeapStable)-mb(r.HeapBefore), "heap-live-MB")
		rows = append(rows, []string{fmt.Sprint(r.Members), fmt.Sprint(r.Partitions), ms(r.JoinedAll), ms(r.Stable),
			fmt.Sprintf("%.0f", r.Heartbeats), fmt.Sprintf("%.0f", r.Healthz), ratio(r.Heartbeats, r.Healthz),
			fmt.Sprintf("%.1f", mb(r.HeapBefore)), fmt.Sprintf("%.1f", mb(r.HeapStable)), fmt.Sprintf("%.1f", float64(r.ClientCapabilityBytes)/(1<<20)),
			fmt.Sprint(r.LateReleases), fmt.Sprint(r.Refused)})
	}
	table(os.Stdout, "Coordinator scale", []string{"members", "partitions", "all joined ms", "stable ms", "heartbeats/s", "healthz/s", "x healthz",
		"live heap before MB", "live heap stable MB", "of it members' tokens MB", "late releases", "429s retried"}, rows)
}
