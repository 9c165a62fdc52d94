package kafkaclients

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/e2e/sdk"
)

// The Kafka listener's targets (issue #15, DESIGN §12), each measured
// against its baseline in the same run — kgo straight to the same kfake —
// and reported with b.ReportMetric and a table on stdout:
//
//	go test -run '^$' -bench KafkaListener -benchtime 1x -timeout 20m ./e2e/kafkaclients/
//
// One iteration is one run of every path. See BENCHMARKS.md §8.

// BenchmarkKafkaListenerThroughput: records/s of 100-byte records to one
// kgo consumer, through the listener and straight to kfake: one partition
// in assign mode (a capability), and four partitions in a KIP-848 group.
//
// The machine is shared and noisy, so the figure is paired: every round
// runs each listener path right beside its direct baseline (which one
// goes first alternates by round; one warm-up round is not counted), a
// garbage collection before each pass, and the ratio is taken within the
// round; the median over the rounds and their range are reported, with
// the load average before and after.
func BenchmarkKafkaListenerThroughput(b *testing.B) {
	for range b.N {
		run := throughputRun(b, benchThroughput)
		run.print()
		run.printWire()
		for _, pr := range run.pairs {
			b.ReportMetric(median(pr.ratios()), pr.key+"-ratio")
			b.ReportMetric(median(pr.cpuRatios()), pr.key+"-cpu-ratio")
			b.ReportMetric(median(pr.direct.rps), pr.key+"-direct-rec/s")
			b.ReportMetric(median(pr.listener.rps), pr.key+"-listener-rec/s")
		}
	}
}

// throughputSize is how much one run reads: perPartition records in each
// of 4 partitions, rounds pairs of passes per path.
type throughputSize struct{ perPartition, rounds int }

// benchThroughput: 2 M records (≈ 0.3 s at 6 M/s) per 1-partition pass,
// 8 M per group pass, 7 rounds: fixed costs (connection, SASL, group
// join) stay below a few percent of a pass, and one disturbed round
// moves no median.
var benchThroughput = throughputSize{perPartition: 2_000_000, rounds: 7}

// throughputRun measures the two pairs of paths.
func throughputRun(b testing.TB, size throughputSize) *throughputResult {
	s := Start(b, Options{Partitions: 4})
	fill(b, s, size.perPartition)
	assign := map[string]map[int32]kgo.Offset{s.Topic: {0: kgo.NewOffset().AtStart()}}
	grant := s.Grant(b, s.Topic, 0, []string{"fetch"}, 10*time.Minute)
	direct := []kgo.Opt{kgo.SeedBrokers(s.Kafka.Addrs()...)}
	wire := &wireCounter{}
	wire.watchKafka(s.Kafka.Cluster())
	res := &throughputResult{size: size, loadBefore: loadAverage()}
	res.pairs = []*throughputPair{{
		key: "1p",
		direct: &throughputPath{name: "1p-direct", path: "direct, 1 partition (ConsumePartitions)", records: size.perPartition, opts: func(int) []kgo.Opt {
			return append(slices.Clone(direct), kgo.ConsumePartitions(assign))
		}},
		listener: &throughputPath{name: "1p-listener", path: "listener, 1 partition (capability)", records: size.perPartition, opts: func(int) []kgo.Opt {
			return listenerOpts(s, grant.Capability, kgo.ConsumePartitions(assign))
		}},
	}, {
		key: "group",
		direct: &throughputPath{name: "group-direct", path: "direct, 4 partitions (KIP-848 group)", records: 4 * size.perPartition, opts: func(round int) []kgo.Opt {
			return append(slices.Clone(direct), groupOpts(fmt.Sprintf("tp-direct-%d", round), s.Topic)...)
		}},
		listener: &throughputPath{name: "group-listener", path: "listener, 4 partitions (KIP-848 group)", records: 4 * size.perPartition, opts: func(round int) []kgo.Opt {
			group := fmt.Sprintf("tp-listener-%d", round) // a group per round (and warm-up): each consumes from the start
			return listenerOpts(s, s.ClientCredential(b, group), groupOpts(group, s.Topic)...)
		}},
	}}
	for _, pr := range res.pairs {
		pr.direct.wc, pr.listener.wc = wire, wire
	}
	for _, pr := range res.pairs { // warm-up, not counted: the first pass over kfake's log pays for touching it
		pr.direct.measure(b, -1)
		pr.listener.measure(b, -1)
		pr.direct.reset()
		pr.listener.reset()
	}
	for round := range size.rounds {
		for _, pr := range res.pairs {
			first, second := pr.direct, pr.listener
			if round%2 == 1 {
				first, second = second, first
			}
			first.measure(b, round)
			second.measure(b, round)
		}
	}
	res.loadAfter = loadAverage()
	return res
}

// throughputResult is one run: its pairs and the machine's load.
type throughputResult struct {
	size                  throughputSize
	pairs                 []*throughputPair
	loadBefore, loadAfter string
}

// throughputPair is a listener path and its direct baseline, measured
// side by side in every round.
type throughputPair struct {
	key              string
	direct, listener *throughputPath
}

// ratios are the listener's records/s over direct's, round by round.
func (pr *throughputPair) ratios() []float64 {
	out := make([]float64, len(pr.direct.rps))
	for i := range out {
		out[i] = pr.listener.rps[i] / pr.direct.rps[i]
	}
	return out
}

// cpuRatios are the listener's process CPU per record over direct's.
func (pr *throughputPair) cpuRatios() []float64 {
	out := make([]float64, len(pr.direct.cpu))
	for i := range out {
		out[i] = pr.listener.cpu[i] / pr.direct.cpu[i]
	}
	return out
}

// coreRatios are the cores the listener's passes kept busy over direct's:
// records/s ratio = coreRatio / cpuRatio, round by round.
func (pr *throughputPair) coreRatios() []float64 {
	l, d := pr.listener.cores(), pr.direct.cores()
	out := make([]float64, len(d))
	for i := range out {
		out[i] = l[i] / d[i]
	}
	return out
}

func (r *throughputResult) print() {
	fmt.Printf("\nKafka listener: records/s of %d-byte uncompressed records to one kgo consumer, %d rounds, load average %s before, %s after\n",
		recordBytes, r.size.rounds, r.loadBefore, r.loadAfter)
	fmt.Printf("(a pass: client creation to its last record, group join included; steady: its first record to its last;\n")
	fmt.Printf(" CPU: the whole test process — kfake, coordinator, gateway, client — per million records)\n")
	fmt.Printf("| path | records/pass | records/s median (min–max) | steady records/s median | CPU ms per M records median | cores used median |\n|---|---|---|---|---|---|\n")
	for _, pr := range r.pairs {
		for _, p := range []*throughputPath{pr.direct, pr.listener} {
			fmt.Printf("| %s | %d | %.2f M (%.2f–%.2f) | %.2f M | %.0f | %.2f |\n", p.path, p.records,
				median(p.rps)/1e6, slices.Min(p.rps)/1e6, slices.Max(p.rps)/1e6, median(p.steady)/1e6, median(p.cpu), median(p.cores()))
		}
	}
	fmt.Printf("\n| listener ÷ direct, same round | records/s median (min–max) | per round | CPU per record median (min–max) | cores used median (min–max) |\n|---|---|---|---|---|\n")
	for _, pr := range r.pairs {
		rs, cs, us := pr.ratios(), pr.cpuRatios(), pr.coreRatios()
		var each []string
		for _, v := range rs {
			each = append(each, fmt.Sprintf("%.2f", v))
		}
		fmt.Printf("| %s | **%.2f** (%.2f–%.2f) | %s | %.2f (%.2f–%.2f) | %.2f (%.2f–%.2f) |\n", pr.key, median(rs), slices.Min(rs), slices.Max(rs),
			strings.Join(each, ", "), median(cs), slices.Min(cs), slices.Max(cs), median(us), slices.Min(us), slices.Max(us))
	}
}

const recordBytes = 100

// fill writes n 100-byte records to every partition, straight to Kafka.
func fill(b testing.TB, s *Stack, n int) {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Kafka.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	value := []byte(strings.Repeat("x", recordBytes))
	ctx := context.Background()
	for p := range s.Partitions {
		for range n {
			cl.Produce(ctx, &kgo.Record{Topic: s.Topic, Partition: p, Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Errorf("fill: %v", err)
				}
			})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}

func groupOpts(group, topic string) []kgo.Opt {
	return []kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.DisableAutoCommit()}
}

func listenerOpts(s *Stack, token string, opts ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(s.KafkaAddrs()...), kgo.SASL(oauthToken(token)), kgo.ClientID("bench")}, opts...)
}

// throughputPath is one way of reading, measured once per round.
type throughputPath struct {
	name    string // for file names
	path    string
	records int
	opts    func(round int) []kgo.Opt
	rps     []float64 // records/s of each round's pass
	steady  []float64 // records/s from the first record to the last
	cpu     []float64 // process CPU ms per million records
	wc      *wireCounter
	wire    wireCounts // summed over the counted passes
	seconds float64    // the counted passes' time
}

// cores is each pass's process CPU per second of the pass.
func (p *throughputPath) cores() []float64 {
	out := make([]float64, len(p.rps))
	for i := range out {
		out[i] = p.cpu[i] * p.rps[i] / 1e9 // ms per M records × records/s
	}
	return out
}

func (p *throughputPath) reset() {
	p.rps, p.steady, p.cpu, p.wire, p.seconds = nil, nil, nil, wireCounts{}, 0
}

// measure consumes every record once (a new group per round), after a
// garbage collection so that no earlier pass's garbage is collected on
// its time.
func (p *throughputPath) measure(b testing.TB, round int) {
	b.Helper()
	runtime.GC()
	opts := append(p.opts(round), kgo.ClientID(fmt.Sprintf("bench-%d", round)), kgo.WithHooks(p.wc))
	stop := profilePass(b, p.name, round)
	defer stop()
	wire0 := p.wc.snapshot()
	cpu0 := processCPU()
	start := time.Now()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var first time.Time
	firstN := 0
	for got := 0; got < p.records; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			b.Fatalf("%s: %d of %d records: %v", p.path, got, p.records, fs.Errors())
		}
		n := fs.NumRecords()
		if got == 0 && n > 0 {
			first, firstN = time.Now(), n
		}
		got += n
	}
	end := time.Now()
	p.wire.add(p.wc.snapshot(), 1)
	p.wire.add(wire0, -1)
	p.seconds += end.Sub(start).Seconds()
	p.rps = append(p.rps, float64(p.records)/end.Sub(start).Seconds())
	p.steady = append(p.steady, float64(p.records-firstN)/max(end.Sub(first).Seconds(), 1e-9))
	p.cpu = append(p.cpu, float64(processCPU()-cpu0)/float64(time.Millisecond)/(float64(p.records)/1e6))
}

func median(v []float64) float64 {
	sorted := slices.Clone(v)
	slices.Sort(sorted)
	n := len(sorted)
	if n%2 == 0 {
		return (sorted[n/2-1] + sorted[n/2]) / 2
	}
	return sorted[n/2]
}

// processCPU is the user and system CPU time this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAverage is the machine's 1-minute load average ("?" when unknown).
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(raw)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// BenchmarkKafkaListenerFetchLatency: sequential 1-record Fetch requests
// (PartitionMaxBytes 1 over single-record batches) sent with kgo's
// Client.Request, through the listener (a capability) and straight to
// kfake.
func BenchmarkKafkaListenerFetchLatency(b *testing.B) {
	const fetches = 5_000
	for range b.N {
		direct, listener := latencyRun(b, 2_000, fetches)
		dp50, dp99 := quantile(direct, 0.50), quantile(direct, 0.99)
		lp50, lp99 := quantile(listener, 0.50), quantile(listener, 0.99)
		fmt.Printf("\nKafka listener: %d sequential 1-record Fetches (kgo Client.Request)\n| path | p50 µs | p99 µs |\n|---|---|---|\n", fetches)
		fmt.Printf("| direct (kfake) | %.0f | %.0f |\n| listener | %.0f | %.0f |\n| listener − direct | %+.0f | %+.0f |\n",
			us(dp50), us(dp99), us(lp50), us(lp99), us(lp50-dp50), us(lp99-dp99))
		b.ReportMetric(us(dp50), "direct-p50-µs")
		b.ReportMetric(us(lp50), "listener-p50-µs")
		b.ReportMetric(us(lp50-dp50), "added-p50-µs")
		b.ReportMetric(us(lp99-dp99), "added-p99-µs")
	}
}

// latencyRun times fetches sequential 1-record Fetches per path over
// records single-record batches; the second of two rounds counts
// (connections warm).
func latencyRun(b testing.TB, records, fetches int) (direct, listener []time.Duration) {
	s := Start(b, Options{Partitions: 1})
	produceDirect(b, s, s.Topic, 0, records) // one batch per record
	grant := s.Grant(b, s.Topic, 0, []string{"fetch"}, 10*time.Minute)
	id := topicID(b, s)
	dc, err := kgo.NewClient(kgo.SeedBrokers(s.Kafka.Addrs()...))
	if err != nil {
		b.Fatal(err)
	}
	defer dc.Close()
	lc, err := kgo.NewClient(listenerOpts(s, grant.Capability)...)
	if err != nil {
		b.Fatal(err)
	}
	defer lc.Close()
	for range 2 {
		direct = fetchSequential(b, dc, s.Topic, id, records, fetches)
		listener = fetchSequential(b, lc, s.Topic, id, records, fetches)
	}
	return direct, listener
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// fetchSequential sends n Fetches of one record each, offset cycling.
func fetchSequential(b testing.TB, cl *kgo.Client, topic string, id [16]byte, records, n int) []time.Duration {
	b.Helper()
	ctx := context.Background()
	lat := make([]time.Duration, 0, n)
	for i := range n {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 0, 1, 1, -1
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = topic, id
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.FetchOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch, p.LogStartOffset = 0, int64(i%records), 1, -1, -1
		t.Partitions = []kmsg.FetchRequestTopicPartition{p}
		req.Topics = []kmsg.FetchRequestTopic{t}
		start := time.Now()
		kresp, err := cl.Request(ctx, req)
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatalf("fetch %d: %v", i, err)
		}
		resp := kresp.(*kmsg.FetchResponse)
		if len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 || len(resp.Topics[0].Partitions[0].RecordBatches) == 0 {
			b.Fatalf("fetch %d: no record: %+v", i, resp)
		}
	}
	return lat
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

// topicID reads the topic's id from Kafka (Fetch v13+ names topics by id).
func topicID(b testing.TB, s *Stack) [16]byte {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Kafka.Addrs()...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(s.Topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || len(resp.Topics) != 1 {
		b.Fatalf("metadata: %v", err)
	}
	return resp.Topics[0].TopicID
}

// BenchmarkKafkaListenerRebalance: three kgo members of a group on 12
// partitions, a fourth joins; join→stable is from the fourth member's
// client creation until every member holds its final 3 partitions (per
// its own OnPartitionsAssigned/Revoked hooks). Through the listener
// (KIP-848 members, capgate assigns; at kafka_heartbeat_interval 100 ms,
// the default, and 500 ms), and against kfake's own KIP-848 at a 500 ms
// heartbeat and cooperative-sticky at kgo's default 3 s heartbeat, in the
// same run.
func BenchmarkKafkaListenerRebalance(b *testing.B) {
	const rounds = 3
	for range b.N {
		paths := rebalanceRun(b, rounds)
		fmt.Printf("\nKafka listener: 3 → 4 kgo members on 12 partitions, join → stable, %d rounds\n| group protocol | median ms | max ms | rounds ms |\n|---|---|---|---|\n", rounds)
		for _, p := range paths {
			var all []string
			for _, d := range p.took {
				all = append(all, fmt.Sprint(d.Milliseconds()))
			}
			fmt.Printf("| %s | %d | %d | %s |\n", p.name, p.median().Milliseconds(), slices.Max(p.took).Milliseconds(), strings.Join(all, ", "))
		}
		for i, unit := range []string{"capgate-ms", "capgate-hb500-ms", "kfake-kip848-hb500-ms", "kfake-coop-ms"} {
			b.ReportMetric(float64(paths[i].median())/float64(time.Millisecond), unit)
		}
	}
}

// rebalancePath is one group protocol's join → stable, per round.
type rebalancePath struct {
	name string
	run  func() time.Duration
	took []time.Duration
}

func (p *rebalancePath) median() time.Duration {
	sorted := slices.Clone(p.took)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}

// rebalanceRun measures every protocol rounds times, interleaved.
func rebalanceRun(b testing.TB, rounds int) []*rebalancePath {
	capgate := func(hb time.Duration) func() time.Duration {
		return func() time.Duration {
			s := Start(b, Options{Partitions: 12, HeartbeatInterval: hb})
			cred := s.ClientCredential(b, "rb")
			return joinToStable(b, func(name string) *groupMember { return joinGroup(b, s, name, "rb", cred, kip848) })
		}
	}
	kafka := func(proto protocol, opts []kfake.Opt, extra ...kgo.Opt) func() time.Duration {
		return func() time.Duration {
			k, err := broker.StartEmbedded(broker.EmbeddedConfig{Topics: map[string]int32{"orders": 12}, Options: opts})
			if err != nil {
				b.Fatal(err)
			}
			defer k.Close()
			return joinToStable(b, func(name string) *groupMember {
				return startMember(b, "orders", name, "rb", proto, func(opts ...kgo.Opt) *kgo.Client {
					cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.Addrs()...)}, opts...)...)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(cl.Close)
					return cl
				}, extra...)
			})
		}
	}
	paths := []*rebalancePath{
		{name: "capgate listener, KIP-848 members, kafka_heartbeat_interval 100ms (default)", run: capgate(100 * time.Millisecond)},
		{name: "capgate listener, KIP-848 members, kafka_heartbeat_interval 500ms", run: capgate(500 * time.Millisecond)},
		{name: "kfake KIP-848, heartbeat 500ms", run: kafka(kip848, []kfake.Opt{kfake.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": "500"})})},
		{name: "kfake cooperative-sticky, heartbeat 3s (kgo default)", run: kafka(cooperativeSticky, nil, kgo.HeartbeatInterval(3*time.Second), kgo.SessionTimeout(45*time.Second))},
	}
	for range rounds {
		for _, p := range paths {
			p.took = append(p.took, p.run())
		}
	}
	return paths
}

// joinToStable settles three members, adds a fourth and returns join →
// stable; the members are closed before it returns.
func joinToStable(b testing.TB, newMember func(name string) *groupMember) time.Duration {
	b.Helper()
	var ms []*groupMember
	for i := range 3 {
		ms = append(ms, newMember(fmt.Sprintf("m%d", i+1)))
	}
	sdk.Eventually(b, 60*time.Second, "3 members settled", func() (bool, string) { return clientsSettled(12, ms...) })
	joined := time.Now()
	ms = append(ms, newMember("m4"))
	sdk.Eventually(b, 60*time.Second, "4 members settled", func() (bool, string) { return clientsSettled(12, ms...) })
	var stable time.Time
	for _, m := range ms {
		if at := m.lastChange(); at.After(stable) {
			stable = at
		}
	}
	for _, m := range ms {
		m.Close()
	}
	return stable.Sub(joined)
}
