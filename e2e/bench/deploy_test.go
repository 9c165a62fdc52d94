package bench

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// deploySizes are the deployment benchmark's sizes: full, -short, smoke.
func deploySizes(smoke bool) (deploySize, deployParams) {
	switch {
	case smoke:
		return deploySize{Brokers: 3, LatencyParts: 3, LatencyRecords: 20, BulkParts: 3, BulkPerPart: 500, SpreadParts: 6, SpreadRecords: 20},
			deployParams{Sequential: 20, Rounds: 1, Workers: 4, LoadFor: 200 * time.Millisecond,
				AttackPolls: 40, AttackWait: 500 * time.Millisecond, Window: 200 * time.Millisecond}
	case testing.Short():
		return deploySize{Brokers: 3, LatencyParts: 3, LatencyRecords: 500, BulkParts: 3, BulkPerPart: 20_000, SpreadParts: 12, SpreadRecords: 500},
			deployParams{Sequential: 500, Rounds: 2, Workers: 16, LoadFor: time.Second,
				AttackPolls: 500, AttackWait: 2 * time.Second, Window: time.Second, ProfileFor: 3 * time.Second}
	}
	return deploySize{Brokers: 3, LatencyParts: 3, LatencyRecords: 2000, BulkParts: 3, BulkPerPart: 300_000, SpreadParts: 12, SpreadRecords: 500},
		deployParams{Sequential: 1000, Rounds: 5, Workers: 16, LoadFor: 3 * time.Second,
			AttackPolls: 500, AttackWait: 2 * time.Second, Window: 2 * time.Second, ProfileFor: 5 * time.Second}
}

// BenchmarkDeploy: capgate deployed as in production (coordinator and
// gateway processes from the built binary, a 3-broker Kafka process, this
// process only generating load) next to franz-go fetching from the same
// brokers; with CAPGATE_BENCH_BASELINE_BIN, an earlier binary side by
// side. Each iteration is one round of every measurement; profiles of
// each gateway go to CAPGATE_BENCH_PROFILE_DIR when set.
func BenchmarkDeploy(b *testing.B) {
	setHaltPoll(b)
	fmt.Printf("vCPU idle: %s\n", idleSetting())
	size, p := deploySizes(false)
	p.ProfileDir = os.Getenv("CAPGATE_BENCH_PROFILE_DIR")
	d := startProcStack(b, size)
	var runs []deployResult
	for range b.N {
		runs = append(runs, d.run(b, p))
	}
	last := runs[len(runs)-1]
	seq, load := figure(last.Sequential, "capgate-raw"), figure(last.Loaded, "capgate-raw")
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(seq.P50.Nanoseconds())/1e3, "raw-p50-µs")
	b.ReportMetric(float64(seq.P99.Nanoseconds())/1e3, "raw-p99-µs")
	// The gateway's CPU per raw fetch in both shapes: from 16 workers (the
	// cost of capacity, #17's target) and one at a time (mostly the
	// wake-ups of an idle process), and the floor of the same phase.
	b.ReportMetric(float64(load.CPU.Nanoseconds())/1e3, "gw-cpu-µs/fetch-16w")
	b.ReportMetric(float64(figure(last.Loaded, "capgate-healthz").CPU.Nanoseconds())/1e3, "gw-floor-µs-16w")
	b.ReportMetric(float64(seq.CPU.Nanoseconds())/1e3, "gw-cpu-µs/fetch-1by1")
	b.ReportMetric(float64(figure(last.Sequential, "capgate-healthz").CPU.Nanoseconds())/1e3, "gw-floor-µs-1by1")
	b.ReportMetric(load.PerSec, "raw-req/s")
	for i, r := range runs {
		deployTables(os.Stdout, fmt.Sprintf("run %d of %d", i+1, len(runs)), size, p, r)
	}
}

// seqAfterScanEnv makes BenchmarkDeploySeq run the consumer scan and the
// isolation phase before each sequential phase, as BenchmarkDeploy's
// rounds do.
const seqAfterScanEnv = "CAPGATE_BENCH_SEQ_AFTER_SCAN"

// BenchmarkDeploySeq runs only the deployment benchmark's sequential
// phase (1-record fetches one at a time, each gateway's /healthz floor
// among them), once per iteration, then medians and ranges of each
// path's gateway CPU per request and its ratio to the same gateway's
// floor: the one-at-a-time cost, where an idle process's wake-ups weigh
// most. -benchtime 10x is ~10 rounds.
func BenchmarkDeploySeq(b *testing.B) {
	setHaltPoll(b)
	idleSet := idleSetting()
	fmt.Printf("vCPU idle: %s\n", idleSet)
	size, p := deploySizes(false)
	d := startProcStack(b, size)
	got := map[string][]float64{}
	userSys := map[string][3]float64{}   // per path over every round: fetches, user ns, system ns
	chunks := map[string][]chunkFigure{} // per path (and placement) over every round
	if dir := os.Getenv("CAPGATE_BENCH_PROFILE_DIR"); dir != "" && b.N > 1 {
		// A CPU profile of each gateway over the first 20 s of the rounds
		// (not the b.N=1 warm-up's): what cmd/capgate/default.pgo is made
		// of (BENCHMARKS.md, Commands).
		var waits []func()
		for _, v := range d.variants {
			waits = append(waits, v.profile(b, dir, "profile", "seq-cpu", 20*time.Second))
		}
		defer func() {
			for _, wait := range waits {
				wait()
			}
		}()
	}
	gcs, served := map[string]float64{}, map[string]float64{} // per variant: GC cycles before the rounds, requests
	for _, v := range d.variants {
		gcs[v.Name] = v.gcCycles(b)
	}
	for i := range b.N {
		if os.Getenv(seqAfterScanEnv) != "" { // as in BenchmarkDeploy, where these precede the next round's sequential phase
			d.scan(b)
			for _, v := range d.variants {
				d.isolation(b, v, p)
			}
		}
		fs := d.sequential(b, p.Rounds, p.Sequential)
		sequentialTable(os.Stdout, fmt.Sprintf("sequential only, round %d of %d", i+1, b.N), p, fs)
		fmt.Printf("load average after the round: %s\n", loadAverage())
		for _, v := range d.variants {
			idle := d.idleCPU(b, v, time.Second)
			fmt.Printf("%s gateway idle: %.0f µs CPU per second\n", v.Name, float64(idle.Nanoseconds())/1e3)
			got[v.Name+" idle µs/s"] = append(got[v.Name+" idle µs/s"], float64(idle.Nanoseconds())/1e3)
		}
		for _, f := range fs {
			if f.Path == "direct-raw" {
				continue
			}
			label, at := f.Path+placeLabel(f.Place), placeLabel(f.Place)
			got[label+" gateway µs"] = append(got[label+" gateway µs"], float64(f.CPU.Nanoseconds())/1e3)
			if floor := figureAt(fs, strings.TrimSuffix(f.Path, suffix(f.Path))+"-healthz", f.Place); floor.CPU > 0 {
				got[label+" × floor"] = append(got[label+" × floor"], float64(f.CPU)/float64(floor.CPU))
			}
			served[strings.TrimSuffix(f.Path, suffix(f.Path))] += float64(f.Fetches)
			t := userSys[label]
			userSys[label] = [3]float64{t[0] + float64(f.Fetches), t[1] + float64(f.User)*float64(f.Fetches), t[2] + float64(f.Sys)*float64(f.Fetches)}
			chunks[label] = append(chunks[label], f.Chunks...)
			// Paired with every other binary's same path in the same round:
			// what this tree changes, net of the machine's moods.
			if name, sfx := strings.TrimSuffix(f.Path, suffix(f.Path)), suffix(f.Path); name == "capgate" {
				for _, v := range d.variants {
					if other := figureAt(fs, v.Name+sfx, f.Place); v.Name != name && other.CPU > 0 {
						got[label+" − "+other.Path+at+" µs"] = append(got[label+" − "+other.Path+at+" µs"], float64((f.CPU-other.CPU).Nanoseconds())/1e3)
						got[label+" ÷ "+other.Path+at] = append(got[label+" ÷ "+other.Path+at], float64(f.CPU)/float64(other.CPU))
					}
				}
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(userSys)) {
		// user and system µs per request over every round together (the
		// kernel's split is tick-sampled: a round alone is too few ticks).
		t := userSys[k]
		got[k+" user µs (all rounds)"] = []float64{t[1] / t[0] / 1e3}
		got[k+" sys µs (all rounds)"] = []float64{t[2] / t[0] / 1e3}
	}
	for _, v := range d.variants {
		// Garbage collections per 100k requests, over the rounds and
		// their idle seconds (a cycle wakes mark workers beside the
		// request's thread).
		if before := gcs[v.Name]; before >= 0 && served[v.Name] > 0 {
			if after := v.gcCycles(b); after >= 0 {
				got[v.Name+" GC cycles per 100k requests"] = []float64{(after - before) / served[v.Name] * 1e5}
			}
		}
	}
	b.ReportMetric(0, "ns/op")
	var rows [][]string
	for _, k := range slices.Sorted(maps.Keys(got)) {
		m, lo, hi, _ := spread(got[k])
		rows = append(rows, []string{k, fmt.Sprintf("%.2f [%.2f–%.2f]", m, lo, hi)})
	}
	table(os.Stdout, "Deployed, one at a time: medians [range] over the rounds (vCPU idle: "+idleSet+")", []string{"path, figure", "median [min–max]"}, rows)
	modesTable(os.Stdout, chunks)
}

// modesTable prints, per path, its chunks of one-at-a-time requests over
// every round by the mode they ran in (deploy_sched.go): how many were
// slow, how many ended with both sides on one vCPU, and the gateway's
// CPU per request of the fast and of the slow chunks, median [range].
func modesTable(w io.Writer, chunks map[string][]chunkFigure) {
	var rows [][]string
	for _, k := range slices.Sorted(maps.Keys(chunks)) {
		cs := chunks[k]
		m := modes(cs)
		var fast, slow []float64
		for _, c := range cs {
			if c.Slow() {
				slow = append(slow, c.CPU)
			} else {
				fast = append(fast, c.CPU)
			}
		}
		rows = append(rows, []string{k, fmt.Sprint(m.Chunks), fmt.Sprint(m.Slow), fmt.Sprint(m.SameVCPU), fmt.Sprintf("%.2f", m.IPIs), medianRange(fast), medianRange(slow)})
	}
	table(w, fmt.Sprintf("Deployed, one at a time: chunks by mode (slow: ≥ %.1f inter-processor interrupts a request)", crossIPIs),
		[]string{"path", "chunks", "slow", "same vCPU", "IPIs/req", "gateway µs fast: median [range]", "gateway µs slow: median [range]"}, rows)
	// The same chunks by their place in their round (kernel's placement
	// only): does a mode follow the path or the position?
	byPos := map[int][2]int{} // position -> chunks, slow
	for k, cs := range chunks {
		if strings.Contains(k, "@") {
			continue
		}
		for _, c := range cs {
			t := byPos[c.Position]
			t[0]++
			if c.Slow() {
				t[1]++
			}
			byPos[c.Position] = t
		}
	}
	rows = nil
	for _, pos := range slices.Sorted(maps.Keys(byPos)) {
		rows = append(rows, []string{fmt.Sprint(pos + 1), fmt.Sprint(byPos[pos][0]), fmt.Sprint(byPos[pos][1])})
	}
	table(w, "Deployed, one at a time: the kernel's placement, chunks by their place in the round", []string{"place in round", "chunks", "slow"}, rows)
}

// medianRange is "median [min–max]" of xs, "—" for none.
func medianRange(xs []float64) string {
	if len(xs) == 0 {
		return "—"
	}
	m, lo, hi, _ := spread(xs)
	return fmt.Sprintf("%.1f [%.1f–%.1f]", m, lo, hi)
}

// BenchmarkDeployScan runs only the deployment benchmark's consumer scan
// (one reader per variant and franz-go's kgo consumer, in an order that
// rotates each round), once per iteration: many alternating rounds of
// the one figure whose spread is widest, for its median. -benchtime 20x
// is ~20 rounds.
func BenchmarkDeployScan(b *testing.B) {
	size, _ := deploySizes(false)
	d := startProcStack(b, size)
	if dir := os.Getenv("CAPGATE_BENCH_PROFILE_DIR"); dir != "" {
		// A CPU profile of each gateway while its SDK consumer scans,
		// over and over, for 5 s.
		for _, v := range d.variants {
			wait := v.profile(b, dir, "profile", "scan-cpu", 5*time.Second)
			for deadline := time.Now().Add(5500 * time.Millisecond); time.Now().Before(deadline); {
				d.scanSDK(b, v, v.Name, 0)
			}
			wait()
		}
	}
	ratios, afterJoin, joins := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	costs := map[string][3][]float64{} // ns per record: load generator, gateway, Kafka
	records := float64(int(size.BulkParts) * size.BulkPerPart)
	for i := range b.N {
		d.joins = nil
		scan := d.scan(b)
		kgo := scan["direct-kgo"]
		rows := [][]string{}
		for _, reader := range slices.Sorted(maps.Keys(scan)) {
			ratios[reader] = append(ratios[reader], scan[reader]/kgo)
			join, after := "—", "—"
			if name, ok := strings.CutSuffix(reader, "-sdk-raw"); ok && len(d.joins[name]) == 1 {
				// records/s from the join's end: the SDK's reading alone.
				j := d.joins[name][0]
				rate := records / (records/scan[reader] - j.Seconds())
				joins[reader] = append(joins[reader], float64(j.Microseconds())/1e3)
				afterJoin[reader] = append(afterJoin[reader], rate/kgo)
				join, after = fmt.Sprintf("%.1f", float64(j.Microseconds())/1e3), ratio(rate, kgo)
			}
			c := d.scanCosts[reader]
			cs := costs[reader]
			for k, ns := range []time.Duration{c.Reader, c.Gateway, c.Kafka} {
				cs[k] = append(cs[k], float64(ns.Nanoseconds()))
			}
			costs[reader] = cs
			rows = append(rows, []string{reader, fmt.Sprintf("%.0f", scan[reader]), ratio(scan[reader], kgo), join, after,
				fmt.Sprint(c.Reader.Nanoseconds()), fmt.Sprint(c.Gateway.Nanoseconds()), fmt.Sprint(c.Kafka.Nanoseconds())})
		}
		table(os.Stdout, fmt.Sprintf("Deployed scan, round %d of %d", i+1, b.N),
			[]string{"reader", "records/s", "× direct kgo", "join ms", "× kgo after the join", "load generator CPU ns/record", "gateways", "Kafka"}, rows)
	}
	b.ReportMetric(0, "ns/op")
	var rows [][]string
	for _, reader := range slices.Sorted(maps.Keys(ratios)) {
		m, lo, hi, above := spread(ratios[reader])
		row := []string{reader, fmt.Sprint(len(ratios[reader])), fmt.Sprintf("%.2f [%.2f–%.2f]", m, lo, hi), fmt.Sprintf("%d of %d", above, len(ratios[reader])), "—", "—"}
		for _, ns := range costs[reader] {
			m, lo, hi, _ := spread(ns)
			row = append(row, fmt.Sprintf("%.0f [%.0f–%.0f]", m, lo, hi))
		}
		if len(joins[reader]) > 0 {
			m, lo, hi, _ := spread(joins[reader])
			row[4] = fmt.Sprintf("%.1f [%.1f–%.1f]", m, lo, hi)
			m, lo, hi, above := spread(afterJoin[reader])
			row[5] = fmt.Sprintf("%.2f [%.2f–%.2f], ≥ 1.0 in %d", m, lo, hi, above)
		}
		rows = append(rows, row)
	}
	table(os.Stdout, "Deployed scan: ratios to the kgo consumer of the same round, median [range]",
		[]string{"reader", "rounds", "× kgo", "≥ 1.0", "join ms", "× kgo after the join", "load generator CPU ns/record", "gateways", "Kafka"}, rows)
}

// BenchmarkDeployLoad runs only the closed-loop phases of the deployment
// benchmark, once per iteration: 16 workers over latency (3 partitions,
// one per broker) and over spread (12 partitions, 4 per broker), every
// path in each, then medians and ranges of each path's req/s, gateway
// CPU per fetch and ratios to the baseline and extra binaries of the same
// round. With CAPGATE_BENCH_PROFILE_DIR, first a CPU profile of each
// gateway under the spread load (raw). -benchtime 10x is ~10 rounds.
func BenchmarkDeployLoad(b *testing.B) {
	size, p := deploySizes(false)
	d := startProcStack(b, size)
	if dir := os.Getenv("CAPGATE_BENCH_PROFILE_DIR"); dir != "" {
		for _, v := range d.variants {
			wait := v.profile(b, dir, "profile", "spread-cpu", 3*time.Second)
			f := workersLoop(b, p.Workers, 3500*time.Millisecond, func(w int) fetchOne {
				return v.fetchOf(d, deploySpread, int32(w)%size.SpreadParts, true)
			})
			wait()
			count := fmt.Sprintf("%d fetches in %v\n", f.Fetches, 3500*time.Millisecond)
			if err := os.WriteFile(dir+"/"+v.Name+"-spread-cpu.fetches", []byte(count), 0o644); err != nil {
				b.Logf("profile count: %v", err)
			}
		}
	}
	type key struct{ shape, path, what string }
	got := map[key][]float64{}
	shapes := []struct {
		name  string
		topic string
		parts int32
	}{{"latency (3 partitions)", deployLatency, size.LatencyParts}, {"spread (12 partitions)", deploySpread, size.SpreadParts}}
	for i := range b.N {
		for _, sh := range shapes {
			before := d.mergeCounts(b)
			fs := d.loaded(b, p.Workers, p.LoadFor, sh.topic, sh.parts)
			loadedTable(os.Stdout, fmt.Sprintf("Deployed load, round %d of %d: %d workers over %s", i+1, b.N, p.Workers, sh.name), fs)
			mergeTable(os.Stdout, d.mergeRows(b, before))
			direct := figure(fs, "direct-raw")
			for _, f := range fs {
				got[key{sh.name, f.Path, "req/s"}] = append(got[key{sh.name, f.Path, "req/s"}], f.PerSec)
				got[key{sh.name, f.Path, "× direct"}] = append(got[key{sh.name, f.Path, "× direct"}], f.PerSec/direct.PerSec)
				if f.Path == direct.Path {
					continue
				}
				got[key{sh.name, f.Path, "gateway µs"}] = append(got[key{sh.name, f.Path, "gateway µs"}], float64(f.CPU.Nanoseconds())/1e3)
				for _, v := range d.variants {
					if other := figure(fs, v.Name+suffix(f.Path)); other.PerSec > 0 && other.Path != f.Path {
						k := key{sh.name, f.Path, "× " + v.Name}
						got[k] = append(got[k], f.PerSec/other.PerSec)
					}
				}
			}
		}
	}
	b.ReportMetric(0, "ns/op")
	var rows [][]string
	for _, k := range slices.SortedFunc(maps.Keys(got), func(a, b key) int {
		return strings.Compare(a.shape+a.path+a.what, b.shape+b.path+b.what)
	}) {
		m, lo, hi, above := spread(got[k])
		rows = append(rows, []string{k.shape, k.path, k.what, fmt.Sprintf("%.2f [%.2f–%.2f]", m, lo, hi), fmt.Sprintf("%d of %d", above, len(got[k]))})
	}
	table(os.Stdout, "Deployed load: medians [range] over the rounds",
		[]string{"shape", "path", "figure", "median [min–max]", "≥ 1"}, rows)
}

// spread is the median, minimum and maximum of xs, and how many are ≥ 1.
func spread(xs []float64) (median, lo, hi float64, atLeastOne int) {
	s := slices.Sorted(slices.Values(xs))
	for _, x := range s {
		if x >= 1 {
			atLeastOne++
		}
	}
	return (s[(len(s)-1)/2] + s[len(s)/2]) / 2, s[0], s[len(s)-1], atLeastOne
}

// TestSmokeDeploy runs the deployment benchmark with tiny sizes and
// checks its figures for sense: every path fetched, the gateway's CPU was
// read, the consumers read everything, the victim was measured.
func TestSmokeDeploy(t *testing.T) {
	size, p := deploySizes(true)
	d := startProcStack(t, size)
	r := d.run(t, p)
	deployTables(io.Discard, "smoke", size, p, r)
	for _, f := range slices.Concat(r.Sequential, r.Loaded, r.Spread) {
		if f.Fetches == 0 || f.P50 <= 0 {
			t.Errorf("%s: %+v", f.Path, f)
		}
	}
	for _, path := range []string{"capgate-json", "capgate-healthz"} { // the floor runs one at a time too
		if f := figure(r.Sequential, path); f.Fetches != p.Sequential*p.Rounds || f.CPU <= 0 {
			t.Errorf("%s: %d fetches (want %d), gateway CPU %v per fetch", path, f.Fetches, p.Sequential*p.Rounds, f.CPU)
		}
	}
	for reader, rate := range r.Scan {
		if rate <= 0 {
			t.Errorf("scan %s: %v records/s", reader, rate)
		}
	}
	if len(r.Scan) != 1+len(d.variants) {
		t.Errorf("scan readers: %v", r.Scan)
	}
	for _, f := range r.Isolation {
		if f.IdleN == 0 || f.AttackN == 0 {
			t.Errorf("isolation: %+v", f)
		}
	}
	t.Logf("sequential %+v", r.Sequential)
	t.Logf("isolation %+v", r.Isolation)

	// CAPGATE_BENCH_SEQ_PACE: every request of every path starts a pace
	// after the one before it began, so a phase of n requests per path
	// lasts at least paths × n × pace.
	const n, pace = 10, 3 * time.Millisecond
	t.Setenv(seqPaceEnv, pace.String())
	start := time.Now()
	fs := d.sequential(t, 1, n)
	if took, least := time.Since(start), time.Duration(len(fs)*n)*pace; took < least {
		t.Errorf("paced at %v, %d paths × %d requests took %v, want ≥ %v", pace, len(fs), n, took, least)
	}
	t.Setenv(seqPaceEnv, "")
	checkPlacements(t, d)
}

// checkPlacements runs the sequential phase in every placement
// (CAPGATE_BENCH_SEQ_PLACE), its order rotating (CAPGATE_BENCH_SEQ_ROTATE),
// and checks the modes' columns against what pinning makes certain: a
// chunk packed ends with the gateway's and the client's busiest threads
// on the first CPU, a chunk spread with the gateway's on the second and
// the client's on the first; every path has one chunk a round, each
// round in another position.
func checkPlacements(t *testing.T, d *procStack) {
	const rounds, n = 2, 20
	all, err := startAffinity()
	if err != nil {
		t.Fatal(err)
	}
	cpus := all.cpus()
	// The vCPUs the gateway's and the client's busiest threads must end
	// on; spread needs two CPUs.
	places, want := "packed", map[string][2]int{placePacked: {cpus[0], cpus[0]}}
	if len(cpus) > 1 {
		places, want[placeSpread] = "packed,spread", [2]int{cpus[1], cpus[0]}
	}
	t.Setenv(seqPlaceEnv, places)
	t.Setenv(seqRotateEnv, "1")
	fs := d.sequential(t, rounds, n)
	paths := 0
	for _, f := range fs {
		if f.Place == placeKernel {
			paths++
		}
		if len(f.Chunks) != rounds || f.Fetches != rounds*n {
			t.Errorf("%s%s: %d chunks, %d fetches; want %d, %d", f.Path, placeLabel(f.Place), len(f.Chunks), f.Fetches, rounds, rounds*n)
			continue
		}
		if f.Chunks[0].Position == f.Chunks[1].Position {
			t.Errorf("%s%s: position %d in both rounds, want the order rotated", f.Path, placeLabel(f.Place), f.Chunks[0].Position)
		}
		for _, c := range f.Chunks {
			if c.Fetches != n || c.P50 <= 0 || c.IPIs < 0 || c.ClientVCPU < 0 {
				t.Errorf("%s%s: chunk %+v", f.Path, placeLabel(f.Place), c)
			}
			w, pinned := want[f.Place]
			if f.Path == "direct-raw" {
				if c.GatewayVCPU != -1 || c.CPU != 0 {
					t.Errorf("direct-raw%s: a gateway's vCPU %d, CPU %.1f µs", placeLabel(f.Place), c.GatewayVCPU, c.CPU)
				}
				w[0] = -1
			} else if c.CPU <= 0 {
				t.Errorf("%s%s: gateway CPU %.1f µs a request", f.Path, placeLabel(f.Place), c.CPU)
			}
			if pinned && (c.GatewayVCPU != w[0] || c.ClientVCPU != w[1]) {
				t.Errorf("%s%s: gateway on vCPU %d, client on %d; pinned to %d and %d", f.Path, placeLabel(f.Place), c.GatewayVCPU, c.ClientVCPU, w[0], w[1])
			}
		}
	}
	if len(fs) != (1+len(want))*paths {
		t.Errorf("%d figures for %d paths in %d placements", len(fs), paths, 1+len(want))
	}
}

// sequentialTable prints the sequential phase: each path's latency next
// to franz-go's, and its gateway's CPU per fetch (each gateway's /healthz
// floor among the paths); then its chunks (one a round) by mode: how
// many ran slow (crossIPIs), the IPIs a request, how many ended with the
// gateway's and the client's busiest threads on one vCPU, and the CPU per
// request of the fast and of the slow chunks.
func sequentialTable(w io.Writer, title string, p deployParams, fs []latencyFigure) {
	direct := figure(fs, "direct-raw")
	var rows [][]string
	for _, f := range fs {
		over50, over99, cpu, fast, slow := "—", "—", "—", "—", "—"
		m := modes(f.Chunks)
		if f.Path != direct.Path {
			over50, over99 = fmt.Sprintf("%+d", (f.P50-direct.P50).Microseconds()), fmt.Sprintf("%+d", (f.P99-direct.P99).Microseconds())
			cpu = fmt.Sprintf("%.1f", float64(f.CPU.Nanoseconds())/1e3)
			if m.Slow < m.Chunks {
				fast = fmt.Sprintf("%.1f", m.FastCPU)
			}
			if m.Slow > 0 {
				slow = fmt.Sprintf("%.1f", m.SlowCPU)
			}
		}
		rows = append(rows, []string{f.Path + placeLabel(f.Place), fmt.Sprint(f.Fetches), us(f.P50), us(f.P99), over50, over99, cpu,
			fmt.Sprintf("%.1f", float64(f.Client.Nanoseconds())/1e3),
			fmt.Sprintf("%d of %d", m.Slow, m.Chunks), fmt.Sprintf("%.2f", m.IPIs), fmt.Sprintf("%d of %d", m.SameVCPU, m.Chunks), fast, slow})
	}
	table(w, fmt.Sprintf("Deployed, %s: sequential 1-record fetches (%d rounds × %d per path, interleaved)", title, p.Rounds, p.Sequential),
		[]string{"path", "fetches", "p50 µs", "p99 µs", "p50 over direct", "p99 over direct", "gateway CPU µs/fetch", "client CPU µs/fetch",
			"slow chunks", "IPIs/req", "same vCPU", "gateway µs fast", "gateway µs slow"}, rows)
}

// deployTables prints one round in BENCHMARKS.md's layout, every figure
// next to franz-go's of the same round.
func deployTables(w io.Writer, title string, size deploySize, p deployParams, r deployResult) {
	sequentialTable(w, title, p, r.Sequential)
	loadedTable(w, fmt.Sprintf("Deployed, %s: %d workers, 1-record fetches over %d partitions on %d brokers", title, p.Workers, size.LatencyParts, size.Brokers), r.Loaded)
	mergeTable(w, r.LoadedMerges)
	loadedTable(w, fmt.Sprintf("Deployed, %s: %d workers, 1-record fetches over %d partitions (%s) on %d brokers", title, p.Workers, size.SpreadParts, deploySpread, size.Brokers), r.Spread)
	mergeTable(w, r.SpreadMerges)

	kgo := r.Scan["direct-kgo"]
	readers := slices.Sorted(maps.Keys(r.Scan))
	var rows [][]string
	for _, reader := range readers {
		rows = append(rows, []string{reader, fmt.Sprintf("%.0f", r.Scan[reader]), ratio(r.Scan[reader], kgo)})
	}
	table(w, fmt.Sprintf("Deployed, %s: one consumer reads %d × %d records of 100 B", title, size.BulkParts, size.BulkPerPart),
		[]string{"reader", "records/s", "× direct kgo"}, rows)

	rows = nil
	for _, f := range r.Isolation {
		rows = append(rows, []string{f.Variant, fmt.Sprint(f.IdleN), us(f.IdleP50), us(f.IdleP99), fmt.Sprint(f.AttackN), us(f.AttackP50), us(f.AttackP99), us(f.Max),
			ratio(float64(f.AttackP99), float64(f.IdleP99)), fmt.Sprint(f.InFlight)})
	}
	table(w, fmt.Sprintf("Deployed, %s: a holder's 1-record fetches, idle and while another holder opens and abandons %d long polls (max_wait %v)", title, p.AttackPolls, p.AttackWait),
		[]string{"gateway", "idle fetches", "idle p50 µs", "idle p99 µs", "attacked fetches", "p50 µs", "p99 µs", "max µs", "p99 × idle", "polls in flight after"}, rows)
}

// suffix is "-json", "-raw" or "-healthz" of a path name.
func suffix(path string) string {
	for _, s := range []string{"-json", "-raw", "-healthz"} {
		if len(path) >= len(s) && path[len(path)-len(s):] == s {
			return s
		}
	}
	return ""
}

// loadedTable prints one closed-loop phase, every path next to franz-go's
// of the same round and to the baseline binary's.
func loadedTable(w io.Writer, title string, fs []latencyFigure) {
	directLoad := figure(fs, "direct-raw")
	var rows [][]string
	for _, f := range fs {
		cpu := "—"
		if f.Path != directLoad.Path {
			cpu = fmt.Sprintf("%.1f", float64(f.CPU.Nanoseconds())/1e3)
		}
		versus := "—"
		if base := figure(fs, "baseline"+suffix(f.Path)); base.PerSec > 0 && f.Path != base.Path && f.Path != directLoad.Path {
			versus = ratio(f.PerSec, base.PerSec)
		}
		rows = append(rows, []string{f.Path, fmt.Sprintf("%.0f", f.PerSec), ratio(f.PerSec, directLoad.PerSec), versus, us(f.P50), us(f.P99), cpu,
			fmt.Sprintf("%.1f", float64(f.Client.Nanoseconds())/1e3), fmt.Sprintf("%.1f", float64(f.Kafka.Nanoseconds())/1e3)})
	}
	table(w, title, []string{"path", "req/s", "× direct", "× baseline", "p50 µs", "p99 µs", "gateway CPU µs/fetch", "client CPU µs/fetch", "kafka CPU µs/fetch"}, rows)
}

// listenSize is BenchmarkDeployListener's deployment: the listen topic
// as §8's benchmark fills it (4 partitions of 2 M records of 100 B), the
// other topics nearly empty (their grants need them to exist).
func listenSize(smoke bool) deploySize {
	s := deploySize{Brokers: 3, LatencyParts: 3, LatencyRecords: 1, BulkParts: 3, BulkPerPart: 1, SpreadParts: 3, SpreadRecords: 1,
		ListenParts: 4, ListenPerPart: 2_000_000}
	switch {
	case smoke:
		s.ListenPerPart = 5_000
	case testing.Short():
		s.ListenPerPart = 200_000
	}
	return s
}

// BenchmarkDeployListener: an unmodified kgo consumer through the
// gateway process's Kafka listener against the same consumer straight to
// the Kafka process (#15's records/s target, in the deployed shape):
// one partition in assign mode (a partition capability) and a KIP-848
// group over 4 partitions (a client credential). Each iteration is one
// round of the four passes, paired; after the rounds, medians [range]
// of the ratios. The first round, not counted, warms the Kafka log.
func BenchmarkDeployListener(b *testing.B) {
	size := listenSize(false)
	d := startProcStack(b, size)
	d.listenRound(b, 0) // warm-up
	before := loadAverage()
	ratios, cpus := map[string][]float64{}, map[string][]float64{}
	for i := range b.N {
		r := d.listenRound(b, i)
		table(os.Stdout, fmt.Sprintf("Deployed Kafka listener, round %d of %d (load %s)", i+1, b.N, loadAverage()), listenHeader, d.listenRows(r))
		for _, pair := range []string{"1p", "group"} {
			direct := r[pair+"-direct"]
			for _, v := range d.listeners() {
				key := pair + "-" + v.Name
				ratios[key] = append(ratios[key], r[key].PerSec/direct.PerSec)
				cpus[key] = append(cpus[key], float64(r[key].total())/float64(direct.total()))
			}
		}
	}
	b.ReportMetric(0, "ns/op")
	var rows [][]string
	for _, key := range slices.Sorted(maps.Keys(ratios)) {
		m, lo, hi, _ := spread(ratios[key])
		atLeast := 0
		for _, r := range ratios[key] {
			if r >= 0.8 {
				atLeast++
			}
		}
		cm, clo, chi, _ := spread(cpus[key])
		rows = append(rows, []string{key, fmt.Sprint(len(ratios[key])), fmt.Sprintf("%.2f [%.2f–%.2f]", m, lo, hi),
			fmt.Sprintf("%d of %d", atLeast, len(ratios[key])), fmt.Sprintf("%.2f [%.2f–%.2f]", cm, clo, chi)})
		b.ReportMetric(m, key+"-ratio")
	}
	table(os.Stdout, fmt.Sprintf("Deployed Kafka listener: listener ÷ direct, same round, median [range] (load %s before, %s after)", before, loadAverage()),
		[]string{"path", "rounds", "records/s", "≥ 0.8", "CPU per record, all processes"}, rows)
}

// TestSmokeDeployListener runs the deployed listener benchmark's round
// with tiny sizes and checks its figures for sense: every pass read
// every record, through the listener the gateway worked and straight to
// Kafka it did not.
func TestSmokeDeployListener(t *testing.T) {
	d := startProcStack(t, listenSize(true))
	r := d.listenRound(t, 0)
	d.listenRows(r)
	for _, pair := range []string{"1p", "group"} {
		want := d.size.ListenPerPart
		if pair == "group" {
			want *= int(d.size.ListenParts)
		}
		for _, name := range []string{pair + "-direct", pair + "-capgate"} {
			f := r[name]
			if f.Records < want || f.PerSec <= 0 || f.Kafka <= 0 {
				t.Errorf("%s: %+v, want %d records", name, f, want)
			}
		}
		if f := r[pair+"-capgate"]; f.Gateway <= 0 {
			t.Errorf("%s-capgate: the gateway spent no CPU: %+v", pair, f)
		}
	}
}
