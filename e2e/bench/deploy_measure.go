package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
)

// What the deployment benchmark measures, per capgate binary and next to
// franz-go talking to the same brokers from the same load generator:
// sequential 1-record fetches (latency, gateway CPU per fetch), 1-record
// fetches from many workers (req/s), one consumer reading a topic
// (records/s), and a normal holder's fetches while another holder opens
// and abandons long polls.

// deployParams are the knobs of one measurement round.
type deployParams struct {
	Sequential  int           // 1-record fetches per path per round
	Rounds      int           // rounds, the paths interleaved in each
	Workers     int           // closed-loop workers
	LoadFor     time.Duration // closed loop per path
	AttackPolls int           // long polls opened and abandoned
	AttackWait  time.Duration // their max_wait
	Window      time.Duration // victim's measuring window, idle and under attack
	ProfileFor  time.Duration // pprof CPU and allocs phases (0: none)
	ProfileDir  string
}

// latencyFigure is one path's sequential or closed-loop figures.
type latencyFigure struct {
	Path     string
	Fetches  int
	P50, P99 time.Duration
	PerSec   float64       // closed loop only
	CPU      time.Duration // gateway CPU per fetch; 0 for direct
	Client   time.Duration // the load generator's CPU per fetch (its client: franz-go or HTTP)
	Kafka    time.Duration // the Kafka process's CPU per fetch (closed loop only)
	// User and Sys are the gateway's CPU per fetch read apart (sequential
	// phase only; 10 ms ticks: CPU is the precise sum).
	User, Sys time.Duration
	// Place is the placement the sequential phase ran it in ("" the
	// kernel's, deploy_sched.go), Chunks its chunks of requests (one a
	// round), each with the mode it ran in (sequential phase only).
	Place  string
	Chunks []chunkFigure
}

// isolationFigure is a normal holder's fetches on an idle gateway and
// while another holder opens and abandons long polls.
type isolationFigure struct {
	Variant                   string
	IdleN, AttackN            int
	IdleP50, IdleP99          time.Duration
	AttackP50, AttackP99, Max time.Duration
	// InFlight is the gateway's in-flight fetches right after the last
	// poll was abandoned (its metric): the polls it was still serving.
	InFlight int
}

// deployResult is one round.
type deployResult struct {
	Sequential []latencyFigure
	Loaded     []latencyFigure
	Spread     []latencyFigure // Loaded over spread: several partitions per broker
	// LoadedMerges and SpreadMerges are the gateways' merged-fetch
	// counts of those two phases (mergeRows).
	LoadedMerges, SpreadMerges [][]string
	Scan                       map[string]float64 // reader -> records/s
	Isolation                  []isolationFigure
}

// figure returns the named path's figure.
func figure(fs []latencyFigure, path string) latencyFigure {
	for _, f := range fs {
		if f.Path == path {
			return f
		}
	}
	return latencyFigure{Path: path}
}

// figureAt returns the named path's figure in a placement.
func figureAt(fs []latencyFigure, path, place string) latencyFigure {
	for _, f := range fs {
		if f.Path == path && f.Place == place {
			return f
		}
	}
	return latencyFigure{Path: path, Place: place}
}

// fetchPath is one way of doing a 1-record fetch of a partition of
// latency or spread; gw is the variant whose gateway serves it (nil for
// direct).
type fetchPath struct {
	name string
	gw   *procCapgate
	mk   func(topic string, partition int32) fetchOne
}

func (d *procStack) paths() []fetchPath {
	ps := []fetchPath{{name: "direct-raw", mk: d.directRaw}}
	for _, v := range d.variants {
		ps = append(ps,
			fetchPath{name: v.Name + "-json", gw: v, mk: func(t string, p int32) fetchOne { return v.fetchOf(d, t, p, false) }},
			fetchPath{name: v.Name + "-raw", gw: v, mk: func(t string, p int32) fetchOne { return v.fetchOf(d, t, p, true) }})
	}
	return ps
}

// floorPaths are, per variant, the cheapest exchange its gateway can
// serve: GET /healthz, a constant answer with no capability check and no
// Kafka, over the same keep-alive connections and from the same workers
// as a fetch. Its CPU per request is the floor under the gateway's CPU
// per fetch on this machine: reading a request and writing an answer
// over loopback through fasthttp and the router (#17's 25 µs target is
// judged against it). Only in the closed-loop phases.
func (d *procStack) floorPaths() []fetchPath {
	var ps []fetchPath
	for _, v := range d.variants {
		ps = append(ps, fetchPath{name: v.Name + "-healthz", gw: v, mk: func(string, int32) fetchOne { return healthz(v.hc) }})
	}
	return ps
}

// healthz is one GET /healthz through hc, checked for its 200.
func healthz(hc *fasthttp.HostClient) fetchOne {
	uri := "http://" + hc.Addr + "/healthz"
	return func(int) error {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI(uri)
		if err := hc.DoTimeout(req, resp, time.Minute); err != nil {
			return err
		}
		if resp.StatusCode() != fasthttp.StatusOK {
			return fmt.Errorf("healthz: %d %s", resp.StatusCode(), resp.Body())
		}
		return nil
	}
}

// records is how many single-record batches a partition of topic
// (latency or spread) holds.
func (d *procStack) records(topic string) int64 {
	if topic == deploySpread {
		return int64(d.size.SpreadRecords)
	}
	return int64(d.size.LatencyRecords)
}

// metadata asks for every topic.
func metadata(ctx context.Context, cl *kgo.Client) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	return req.RequestWith(ctx, cl)
}

// directRaw is franz-go's raw Fetch of one record at a time from the
// partition's leader: the request the gateway itself makes, without the
// gateway.
func (d *procStack) directRaw(topicName string, partition int32) fetchOne {
	var topicID [16]byte
	ctx := context.Background()
	if resp, err := metadata(ctx, d.direct); err == nil {
		for _, t := range resp.Topics {
			if t.Topic != nil && *t.Topic == topicName {
				topicID = t.TopicID
			}
		}
	}
	br := d.direct.Broker(int(d.leaders[topicName+"/"+strconv.Itoa(int(partition))]))
	n := d.records(topicName)
	return func(i int) error {
		offset := int64(i) % n
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = 0, 1, 1, -1
		part := kmsg.NewFetchRequestTopicPartition()
		part.Partition, part.FetchOffset, part.PartitionMaxBytes, part.CurrentLeaderEpoch = partition, offset, 1, -1
		topic := kmsg.NewFetchRequestTopic()
		topic.Topic, topic.TopicID, topic.Partitions = topicName, topicID, []kmsg.FetchRequestTopicPartition{part}
		req.Topics = []kmsg.FetchRequestTopic{topic}
		kresp, err := br.Request(ctx, req)
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.FetchResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("direct fetch at %d: %d topics in the answer", offset, len(resp.Topics))
		}
		p := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return fmt.Errorf("direct fetch at %d: %w", offset, err)
		}
		if len(p.RecordBatches) == 0 {
			return fmt.Errorf("direct fetch at %d: no records", offset)
		}
		return nil
	}
}

// fetch is a 1-record fetch of latency/partition through v's gateway.
func (v *procCapgate) fetch(d *procStack, partition int32, raw bool) fetchOne {
	return v.fetchOf(d, deployLatency, partition, raw)
}

// fetchOf is a 1-record fetch of topic/partition through v's gateway.
func (v *procCapgate) fetchOf(d *procStack, topic string, partition int32, raw bool) fetchOne {
	return httpFetch(v.hc, v.caps[topic+"/"+strconv.Itoa(int(partition))], topic, partition, d.records(topic), raw)
}

// seqOnlyEnv names the paths the sequential phase runs (comma-separated,
// e.g. "capgate-raw,capgate-healthz"): one path alone for long enough to
// watch the gateway with perf or strace.
const seqOnlyEnv = "CAPGATE_BENCH_SEQ_ONLY"

// seqPaceEnv sets the sequential phase's rhythm (a Go duration, e.g.
// "80us"): each request starts that long after the one before it began,
// the client spinning out the rest (a sleep would let its core halt, which
// changes what waking it costs). Every path then leaves the gateway idle
// for the same time between requests, whatever the client does with an
// answer: a fetch path's figure beside its floor's is capgate's own work
// above the floor, not the two clients' pacing (BENCHMARKS.md §0,
// "Twenty-eighth pass"). A request that takes longer than the pace is
// followed at once. The client CPU column then includes the spinning.
const seqPaceEnv = "CAPGATE_BENCH_SEQ_PACE"

// seqRotateEnv, when set, rotates the order of the sequential phase's
// paths by one every round (as the closed-loop phases' is), so that no
// path always runs right after the same other: which mode a chunk gets
// can follow its position in the round (BENCHMARKS.md §0, "Thirtieth
// pass"); the modes table counts slow chunks by position too.
const seqRotateEnv = "CAPGATE_BENCH_SEQ_ROTATE"

// seqPace is the pace seqPaceEnv sets, 0 for none.
func seqPace(tb testing.TB) time.Duration {
	v := os.Getenv(seqPaceEnv)
	if v == "" {
		return 0
	}
	pace, err := time.ParseDuration(v)
	if err != nil || pace < 0 {
		tb.Fatalf("%s=%q: want a duration ≥ 0, e.g. 80us", seqPaceEnv, v)
	}
	return pace
}

// sequential runs the paths one after another, rounds times, n fetches
// each time, and measures the gateway's CPU over each path's fetches;
// each gateway's floor (GET /healthz) runs among them, one at a time too.
// With seqPlaceEnv each path runs once per placement too (after the
// kernel's), both processes pinned (deploy_sched.go); every chunk of n
// is also measured for the mode it ran in.
func (d *procStack) sequential(tb testing.TB, rounds, n int) []latencyFigure {
	paths := append(d.paths(), d.floorPaths()...)
	if only := os.Getenv(seqOnlyEnv); only != "" {
		names := strings.Split(only, ",")
		paths = slices.DeleteFunc(paths, func(p fetchPath) bool { return !slices.Contains(names, p.name) })
	}
	places := seqPlaces(tb)
	type acc struct {
		lat                    []time.Duration
		cpu, client, user, sys time.Duration
		chunks                 []chunkFigure
	}
	accs := make([]acc, len(paths)*len(places))
	pace := seqPace(tb)
	rotate := os.Getenv(seqRotateEnv) != ""
	for round := range rounds {
		for k, place := range places {
			for pos := range paths {
				i := pos
				if rotate {
					i = (pos + d.seqRounds) % len(paths)
				}
				p := paths[i]
				a := &accs[k*len(paths)+i]
				if len(places) > 1 {
					d.place(tb, p.gw, place)
				}
				do := p.mk(deployLatency, 0)
				u0, s0 := d.gatewayTimes(tb, p.gw)
				sched0 := d.schedSample(tb, p.gw)
				before, self := d.gatewayCPU(tb, p.gw), selfCPU()
				for j := range n {
					start := time.Now()
					if err := do(round*n + j); err != nil {
						tb.Fatalf("%s%s: %v", p.name, placeLabel(place), err)
					}
					a.lat = append(a.lat, time.Since(start))
					for pace > 0 && time.Since(start) < pace {
					}
				}
				cpu := d.gatewayCPU(tb, p.gw) - before
				a.cpu += cpu
				a.client += selfCPU() - self
				u1, s1 := d.gatewayTimes(tb, p.gw)
				a.user, a.sys = a.user+u1-u0, a.sys+s1-s0
				c := d.schedSample(tb, p.gw).chunk(sched0, a.lat[len(a.lat)-n:], cpu)
				c.Position = pos
				a.chunks = append(a.chunks, c)
			}
		}
		d.seqRounds++
	}
	if len(places) > 1 {
		d.place(tb, nil, placeKernel)
		for _, v := range d.variants {
			d.place(tb, v, placeKernel)
		}
	}
	out := make([]latencyFigure, len(accs))
	for k, place := range places {
		for i, p := range paths {
			a := &accs[k*len(paths)+i]
			p50, p99, _ := quantiles(a.lat)
			out[k*len(paths)+i] = latencyFigure{Path: p.name, Place: place, Fetches: len(a.lat), P50: p50, P99: p99, CPU: perFetch(a.cpu, len(a.lat), p.gw),
				Client: a.client / time.Duration(max(len(a.lat), 1)),
				User:   perFetch(a.user, len(a.lat), p.gw), Sys: perFetch(a.sys, len(a.lat), p.gw), Chunks: a.chunks}
		}
	}
	return out
}

// place pins v's gateway (if any) and this process for a placement.
func (d *procStack) place(tb testing.TB, v *procCapgate, place string) {
	gateway, client, err := placeMasks(place)
	if err != nil {
		tb.Fatal(err)
	}
	if err := pin(os.Getpid(), client); err != nil {
		tb.Fatal(err)
	}
	if v != nil {
		if err := pin(v.gateway.Pid(), gateway); err != nil {
			tb.Fatal(err)
		}
	}
}

// schedState is the machine's IPIs and both processes' threads at one
// moment: chunk turns two of them into a chunk's figures.
type schedState struct {
	ipis            uint64
	gateway, client map[string]threadStat
}

func (d *procStack) schedSample(tb testing.TB, v *procCapgate) schedState {
	var s schedState
	var err error
	if s.ipis, err = ipiCount(); err != nil {
		tb.Fatal(err)
	}
	if s.client, err = threadStats(os.Getpid()); err != nil {
		tb.Fatal(err)
	}
	if v != nil {
		if s.gateway, err = threadStats(v.gateway.Pid()); err != nil {
			tb.Fatalf("%s: %v", v.Name, err)
		}
	}
	return s
}

// chunk is the figures of the chunk of requests lat that ran between
// before and s, the gateway spending cpu on them.
func (s schedState) chunk(before schedState, lat []time.Duration, cpu time.Duration) chunkFigure {
	n := len(lat)
	p50, _, _ := quantiles(slices.Clone(lat))
	c := chunkFigure{Fetches: n, P50: float64(p50.Nanoseconds()) / 1e3, IPIs: float64(s.ipis-before.ipis) / float64(max(n, 1)),
		GatewayVCPU: -1, ClientVCPU: busiestVCPU(before.client, s.client)}
	if s.gateway != nil {
		c.CPU = float64(cpu.Nanoseconds()) / 1e3 / float64(max(n, 1))
		c.GatewayVCPU = busiestVCPU(before.gateway, s.gateway)
	}
	return c
}

// gatewayTimes is v's gateway's user and system CPU so far (0 for no
// gateway: the direct path).
func (d *procStack) gatewayTimes(tb testing.TB, v *procCapgate) (user, sys time.Duration) {
	if v == nil {
		return 0, 0
	}
	user, sys, err := processTimes(v.gateway.Pid())
	if err != nil {
		tb.Fatalf("%s: cpu: %v", v.Name, err)
	}
	return user, sys
}

// idleCPU is v's gateway's CPU per second over d with no request from
// this process: what its own timers and its sync with the coordinator
// cost, which any phase's CPU per fetch carries.
func (d *procStack) idleCPU(tb testing.TB, v *procCapgate, window time.Duration) time.Duration {
	before, start := d.gatewayCPU(tb, v), time.Now()
	time.Sleep(window)
	return time.Duration(float64(d.gatewayCPU(tb, v)-before) / time.Since(start).Seconds())
}

// selfCPU is this process's CPU time so far (user + system): the load
// generator's own cost, its client's included.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (d *procStack) gatewayCPU(tb testing.TB, v *procCapgate) time.Duration {
	if v == nil {
		return 0
	}
	c, err := v.cpu()
	if err != nil {
		tb.Fatalf("%s: cpu: %v", v.Name, err)
	}
	return c
}

func perFetch(cpu time.Duration, n int, v *procCapgate) time.Duration {
	if v == nil || n == 0 {
		return 0
	}
	return cpu / time.Duration(n)
}

// loaded runs each path with workers closed-loop workers for d; worker w
// reads partition w mod parts of topic, so every broker is busy. The
// path that goes first rotates from one call to the next (a load that
// comes and goes on a shared machine falls on each in turn).
func (d *procStack) loaded(tb testing.TB, workers int, dur time.Duration, topic string, parts int32) []latencyFigure {
	var out []latencyFigure
	paths := append(d.paths(), d.floorPaths()...)
	k := d.loads % len(paths)
	d.loads++
	for _, p := range append(paths[k:], paths[:k]...) {
		before, self, kafka := d.gatewayCPU(tb, p.gw), selfCPU(), d.kafkaCPU()
		mk := func(w int) fetchOne {
			do := p.mk(topic, int32(w)%parts)
			return func(i int) error {
				if err := do(i); err != nil {
					return fmt.Errorf("%s: %w", p.name, err)
				}
				return nil
			}
		}
		f := workersLoop(tb, workers, dur, mk)
		n := time.Duration(max(f.Fetches, 1))
		f.Path = p.name
		f.CPU = perFetch(d.gatewayCPU(tb, p.gw)-before, f.Fetches, p.gw)
		f.Client, f.Kafka = (selfCPU()-self)/n, (d.kafkaCPU()-kafka)/n
		out = append(out, f)
	}
	return out
}

// kafkaCPU is the Kafka process's CPU time so far (0 if unreadable).
func (d *procStack) kafkaCPU() time.Duration {
	c, _ := processCPU(d.kafka.Pid())
	return c
}

// workersLoop runs workers that each fetch one after another for d.
func workersLoop(tb testing.TB, workers int, d time.Duration, mk func(worker int) fetchOne) latencyFigure {
	var mu sync.Mutex
	var all []time.Duration
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			do := mk(w)
			var mine []time.Duration
			for i := w * 7919; time.Now().Before(stop); i++ {
				t0 := time.Now()
				if err := do(i); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := failed.Load(); err != nil {
		tb.Fatalf("closed loop: %v", *err)
	}
	p50, p99, _ := quantiles(all)
	return latencyFigure{Fetches: len(all), P50: p50, P99: p99, PerSec: float64(len(all)) / elapsed.Seconds()}
}

// scan reads the bulk topic with a franz-go consumer and with one SDK
// consumer per variant (raw record batches), and returns records/s.
func (d *procStack) scan(tb testing.TB) map[string]float64 {
	want := int(d.size.BulkParts) * d.size.BulkPerPart
	readers := []func() (string, float64){func() (string, float64) {
		return "direct-kgo", scanKgo(tb, d.addrs, deployBulk, d.size.BulkParts, want)
	}}
	for _, v := range d.variants {
		readers = append(readers, func() (string, float64) { return v.Name + "-sdk-raw", d.scanSDK(tb, v, v.Name, 0) })
	}
	if n, _ := strconv.Atoi(os.Getenv(sdkFetchBytesEnv)); n > 0 && len(d.variants) > 0 {
		// The working tree's gateway once more, its SDK reader asking
		// for n bytes a fetch: an A/B of the SDK's fetch size.
		v, name := d.variants[0], fmt.Sprintf("%s-fetch%dk", d.variants[0].Name, n>>10)
		readers = append(readers, func() (string, float64) { return name + "-sdk-raw", d.scanSDK(tb, v, name, int32(n)) })
	}
	// Each round starts with the next reader, and each reader with the
	// garbage of the one before collected: in a fixed order the reader
	// right after kgo's scan (which leaves ~0.2 GB of records behind) was
	// the slowest; the same binary read 0.69× and 0.94× kgo in one run,
	// first and second in line.
	out := map[string]float64{}
	for i := range readers {
		runtime.GC()
		self, kafka, gateways := selfCPU(), d.kafkaCPU(), d.gatewaysCPU(tb)
		name, rate := readers[(d.scans+i)%len(readers)]()
		out[name] = rate
		if d.scanCosts == nil {
			d.scanCosts = map[string]scanCost{}
		}
		per := func(cpu time.Duration) time.Duration { return cpu / time.Duration(want) }
		d.scanCosts[name] = scanCost{Reader: per(selfCPU() - self), Gateway: per(d.gatewaysCPU(tb) - gateways), Kafka: per(d.kafkaCPU() - kafka)}
	}
	d.scans++
	return out
}

// scanCost is the CPU one scan cost per record: the load generator's
// (the reader, its garbage collection included), every gateway's (only
// the one read through works) and the Kafka process's.
type scanCost struct{ Reader, Gateway, Kafka time.Duration }

// gatewaysCPU is the CPU time of every variant's gateway so far.
func (d *procStack) gatewaysCPU(tb testing.TB) time.Duration {
	var total time.Duration
	for _, v := range d.variants {
		total += d.gatewayCPU(tb, v)
	}
	return total
}

// scanSDK reads the bulk topic with one SDK consumer (raw record
// batches) through v, the only member of a new group, and returns
// records/s.
func (d *procStack) scanSDK(tb testing.TB, v *procCapgate, name string, fetchBytes int32) float64 {
	group := "scan-" + randomID()
	cfg := client.DefaultConfig()
	if fetchBytes > 0 {
		cfg.FetchMaxBytes = fetchBytes
	}
	cfg.CoordinatorURL, cfg.Gateways = v.CoordinatorURL, []string{v.GatewayURL}
	cfg.Group, cfg.Topics, cfg.Credential, cfg.Raw = group, []string{deployBulk}, v.credential(tb, group), true
	rate, join := scanSDKJoin(tb, cfg, int(d.size.BulkParts)*d.size.BulkPerPart)
	if d.joins == nil {
		d.joins = map[string][]time.Duration{}
	}
	d.joins[name] = append(d.joins[name], join)
	return rate
}

// isolation measures a normal holder's sequential 1-record fetches on
// v's gateway for p.Window, idle, then while another holder opens and
// abandons p.AttackPolls long polls of an idle partition led by the same
// broker (a shared broker connection pool is what the attack went for).
func (d *procStack) isolation(tb testing.TB, v *procCapgate, p deployParams) isolationFigure {
	victim := v.fetch(d, 0, false)
	v.waitIdle(tb)
	idle := timedWindow(tb, p.Window, victim, nil)
	target := d.idleOnLeaderOf(0)
	token := v.caps[deployIdle+"/"+strconv.Itoa(int(target))]
	inFlight := -1
	under := timedWindow(tb, p.Window, victim, func() {
		abandonPolls(tb, v.GatewayURL, token, target, p.AttackWait, p.AttackPolls)
		inFlight = v.inflight(tb)
	})
	v.waitIdle(tb)
	f := isolationFigure{Variant: v.Name, IdleN: len(idle), AttackN: len(under), InFlight: inFlight}
	f.IdleP50, f.IdleP99, _ = quantiles(idle)
	f.AttackP50, f.AttackP99, f.Max = quantiles(under)
	return f
}

// inflight reads the gateway's capgate_gateway_inflight_fetches metric.
func (v *procCapgate) inflight(tb testing.TB) int {
	return int(v.metric(tb, "capgate_gateway_inflight_fetches"))
}

// metric reads one unlabelled metric of the gateway (-1 when it has none).
func (v *procCapgate) metric(tb testing.TB, name string) float64 {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(v.GatewayURL + "/metrics")
	if err != nil {
		tb.Logf("%s: metrics: %v", v.Name, err)
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			n, _ := strconv.ParseFloat(rest, 64)
			return n
		}
	}
	return -1
}

// waitIdle waits (up to 2 minutes) until the gateway serves no fetch: an
// earlier attack may still hold it.
func (v *procCapgate) waitIdle(tb testing.TB) {
	deadline := time.Now().Add(2 * time.Minute)
	for v.inflight(tb) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

// idleOnLeaderOf is an idle partition led by the leader of latency/p.
func (d *procStack) idleOnLeaderOf(p int32) int32 {
	leader := d.leaders[deployLatency+"/"+strconv.Itoa(int(p))]
	for q := range d.size.LatencyParts {
		if d.leaders[deployIdle+"/"+strconv.Itoa(int(q))] == leader {
			return q
		}
	}
	return p
}

// timedWindow runs do one after another from now until window passed and
// attack (if any, run alongside) returned, and returns the latencies of
// every fetch started meanwhile.
func timedWindow(tb testing.TB, window time.Duration, do fetchOne, attack func()) []time.Duration {
	done := make(chan struct{})
	if attack != nil {
		go func() { defer close(done); attack() }()
	} else {
		close(done)
	}
	var lat []time.Duration
	end := time.Now().Add(window)
	for i := 0; ; i++ {
		attacking := true
		select {
		case <-done:
			attacking = false
		default:
		}
		if !attacking && time.Now().After(end) {
			break
		}
		start := time.Now()
		if err := do(i); err != nil {
			tb.Fatalf("victim's fetch: %v", err)
		}
		lat = append(lat, time.Since(start))
	}
	return lat
}

// abandonPolls opens n connections to the gateway at base, in waves of
// 50, each sending a long poll of idle/partition with max_wait and
// closing 50 ms later without reading the answer.
func abandonPolls(tb testing.TB, base, token string, partition int32, wait time.Duration, n int) {
	raw := fmt.Sprintf("GET /v1/topics/%s/partitions/%d/records?offset=latest&max_wait_ms=%d HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n\r\n",
		deployIdle, partition, wait.Milliseconds(), token)
	addr := base[len("http://"):]
	var wg sync.WaitGroup
	for i := range n {
		if i > 0 && i%50 == 0 {
			time.Sleep(20 * time.Millisecond)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				tb.Logf("attacker: %v", err)
				return
			}
			defer conn.Close()
			_, _ = conn.Write([]byte(raw))
			time.Sleep(50 * time.Millisecond)
		}()
	}
	wg.Wait()
}

// httpFetch is a 1-record fetch of topic/partition through a gateway,
// record i modulo length, JSON or raw, checked for its next offset.
func httpFetch(hc *fasthttp.HostClient, capability, topic string, partition int32, length int64, raw bool) fetchOne {
	token := "Bearer " + capability
	base := "http://" + hc.Addr + "/v1/topics/" + topic + "/partitions/" + strconv.Itoa(int(partition)) + "/records?max_bytes=1&offset="
	return func(i int) error {
		offset := int64(i) % length
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI(base + strconv.FormatInt(offset, 10))
		req.Header.Set("Authorization", token)
		if raw {
			req.Header.Set("Accept", api.MediaRecordBatch)
		}
		if err := hc.DoTimeout(req, resp, time.Minute); err != nil {
			return err
		}
		if resp.StatusCode() != fasthttp.StatusOK {
			return fmt.Errorf("gateway fetch at %d: %d %s", offset, resp.StatusCode(), resp.Body())
		}
		if next := string(resp.Header.Peek(api.HeaderNextOffset)); next != strconv.FormatInt(offset+1, 10) {
			return fmt.Errorf("gateway fetch at %d: next offset %q", offset, next)
		}
		return nil
	}
}

// profiles fetches CPU and allocation profiles of each variant's gateway
// while 1-record fetches (JSON and raw, alternating) run: one after
// another ("seq") and from p.Workers workers ("load").
func (d *procStack) profiles(tb testing.TB, p deployParams) {
	if p.ProfileDir == "" || p.ProfileFor <= 0 {
		return
	}
	for _, v := range d.variants {
		for _, shape := range []struct {
			name    string
			workers int
		}{{"seq", 1}, {"load", p.Workers}} {
			for _, kind := range []string{"profile", "allocs"} {
				name := shape.name + "-" + map[string]string{"profile": "cpu", "allocs": "allocs"}[kind]
				wait := v.profile(tb, p.ProfileDir, kind, name, p.ProfileFor)
				f := workersLoop(tb, shape.workers, p.ProfileFor+500*time.Millisecond, func(w int) fetchOne {
					json, raw := v.fetch(d, int32(w)%d.size.LatencyParts, false), v.fetch(d, int32(w)%d.size.LatencyParts, true)
					return func(i int) error {
						if i%2 == 1 {
							return raw(i)
						}
						return json(i)
					}
				})
				wait()
				// The fetches made meanwhile (the profile covers all but the
				// last half second): for per-fetch figures.
				count := fmt.Sprintf("%d fetches in %v\n", f.Fetches, p.ProfileFor+500*time.Millisecond)
				if err := os.WriteFile(filepath.Join(p.ProfileDir, v.Name+"-"+name+".fetches"), []byte(count), 0o644); err != nil {
					tb.Logf("profile count: %v", err)
				}
			}
		}
	}
}

// runDeploy is one round of every measurement.
func (d *procStack) run(tb testing.TB, p deployParams) deployResult {
	var r deployResult
	r.Sequential = d.sequential(tb, p.Rounds, p.Sequential)
	before := d.mergeCounts(tb)
	r.Loaded = d.loaded(tb, p.Workers, p.LoadFor, deployLatency, d.size.LatencyParts)
	r.LoadedMerges, before = d.mergeRows(tb, before), d.mergeCounts(tb)
	r.Spread = d.loaded(tb, p.Workers, p.LoadFor, deploySpread, d.size.SpreadParts)
	r.SpreadMerges = d.mergeRows(tb, before)
	r.Scan = d.scan(tb)
	for _, v := range d.variants {
		r.Isolation = append(r.Isolation, d.isolation(tb, v, p))
	}
	d.profiles(tb, p)
	return r
}

// mergedMetrics are the gateway's counts of merged Kafka Fetches, then
// of its read-ahead.
var mergedMetrics = []string{"capgate_gateway_merged_fetch_requests_total", "capgate_gateway_merged_fetches_total",
	"capgate_gateway_merge_queued_fetches_total", "capgate_gateway_merged_fetches_alone_total", "capgate_gateway_merged_parts_dropped_total",
	"capgate_gateway_read_ahead_fills_total", "capgate_gateway_read_ahead_hits_total"}

// mergeCounts reads each variant's merged-fetch counts (absent: -1).
func (d *procStack) mergeCounts(tb testing.TB) map[string][]float64 {
	out := map[string][]float64{}
	for _, v := range d.variants {
		for _, name := range mergedMetrics {
			out[v.Name] = append(out[v.Name], v.metric(tb, name))
		}
	}
	return out
}

// mergeRows is what each variant merged since before: Fetch requests
// that carried several fetches, the fetches they carried, per request,
// queued, fetched again alone, dropped; read-ahead fills and fetches
// answered from them ("—" for a binary without read-ahead).
func (d *procStack) mergeRows(tb testing.TB, before map[string][]float64) [][]string {
	var rows [][]string
	for name, now := range d.mergeCounts(tb) {
		if now[0] < 0 {
			continue // a binary without merging
		}
		delta := make([]float64, len(now))
		for i := range now {
			delta[i] = now[i] - before[name][i]
		}
		per := "—"
		if delta[0] > 0 {
			per = fmt.Sprintf("%.2f", delta[1]/delta[0])
		}
		fills, hits := "—", "—"
		if now[5] >= 0 {
			fills, hits = fmt.Sprint(delta[5]), fmt.Sprint(delta[6])
		}
		rows = append(rows, []string{name, fmt.Sprint(delta[0]), fmt.Sprint(delta[1]), per, fmt.Sprint(delta[2]), fmt.Sprint(delta[3]), fmt.Sprint(delta[4]), fills, hits})
	}
	slices.SortFunc(rows, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return rows
}

// mergeTable prints mergeRows.
func mergeTable(w io.Writer, rows [][]string) {
	table(w, "merged Kafka Fetches and read-ahead in this phase", []string{"gateway", "merged requests", "fetches carried", "per request", "queued", "again alone", "dropped", "read-ahead fills", "answered from them"}, rows)
}

// gcCycles is how many garbage collections v's gateway has run (its
// /metrics' go_gc_duration_seconds_count), -1 when it does not say.
func (v *procCapgate) gcCycles(tb testing.TB) float64 {
	return v.metric(tb, "go_gc_duration_seconds_count")
}
