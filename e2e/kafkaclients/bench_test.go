package kafkaclients

import (
	"context"
	"fmt"
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
func BenchmarkKafkaListenerThroughput(b *testing.B) {
	for range b.N {
		rows := throughputRun(b, 500_000, 5)
		fmt.Printf("\nKafka listener: records/s of %d-byte uncompressed records to one kgo consumer, median of %d interleaved passes\n", recordBytes, len(rows[0].all))
		fmt.Printf("(from client creation to its last record; group joins included)\n")
		fmt.Printf("(CPU: the whole test process — kfake, coordinator, gateway and the client — per million records, median of the passes;\n")
		fmt.Printf(" on a loaded machine it is the steadier figure: records/s follows the share of the cores the run gets)\n")
		fmt.Printf("| path | records | records/s | × direct | CPU ms per M records | × direct | passes |\n|---|---|---|---|---|---|---|\n")
		for i, r := range rows {
			base := rows[i&^1]
			fmt.Printf("| %s | %d | %.0f | %.2f | %.0f | %.2f | %s |\n", r.path, r.records, r.rps, r.rps/base.rps, r.cpu, r.cpu/base.cpu, r.passes())
		}
		b.ReportMetric(rows[0].rps, "direct-1p-rec/s")
		b.ReportMetric(rows[1].rps, "listener-1p-rec/s")
		b.ReportMetric(rows[1].rps/rows[0].rps, "1p-ratio")
		b.ReportMetric(rows[2].rps, "direct-group-rec/s")
		b.ReportMetric(rows[3].rps, "listener-group-rec/s")
		b.ReportMetric(rows[3].rps/rows[2].rps, "group-ratio")
	}
}

// throughputRun measures the four paths, passes times each, interleaved
// (so load changes hit every path alike), on perPartition records in each
// of 4 partitions.
func throughputRun(b testing.TB, perPartition, passes int) []*throughputRow {
	s := Start(b, Options{Partitions: 4})
	fill(b, s, perPartition)
	assign := map[string]map[int32]kgo.Offset{s.Topic: {0: kgo.NewOffset().AtStart()}}
	grant := s.Grant(b, s.Topic, 0, []string{"fetch"}, 10*time.Minute)
	direct := []kgo.Opt{kgo.SeedBrokers(s.Kafka.Addrs()...)}
	rows := []*throughputRow{
		{path: "direct, 1 partition (ConsumePartitions)", records: perPartition, opts: func(int) []kgo.Opt {
			return append(slices.Clone(direct), kgo.ConsumePartitions(assign))
		}},
		{path: "listener, 1 partition (capability)", records: perPartition, opts: func(int) []kgo.Opt {
			return listenerOpts(s, grant.Capability, kgo.ConsumePartitions(assign))
		}},
		{path: "direct, 4 partitions (KIP-848 group)", records: 4 * perPartition, opts: func(pass int) []kgo.Opt {
			return append(slices.Clone(direct), groupOpts(fmt.Sprintf("tp-direct-%d", pass), s.Topic)...)
		}},
		{path: "listener, 4 partitions (KIP-848 group)", records: 4 * perPartition, opts: func(pass int) []kgo.Opt {
			group := fmt.Sprintf("tp-listener-%d", pass) // a group per pass: each consumes from the start
			return listenerOpts(s, s.ClientCredential(b, group), groupOpts(group, s.Topic)...)
		}},
	}
	for pass := range passes {
		for _, r := range rows {
			r.measure(b, pass)
		}
	}
	return rows
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

type throughputRow struct {
	path    string
	records int
	opts    func(pass int) []kgo.Opt
	all     []float64 // records/s of each pass
	rps     float64   // their median
	cpus    []float64 // process CPU ms per million records of each pass
	cpu     float64   // their median
}

func (r *throughputRow) passes() string {
	var out []string
	for _, v := range r.all {
		out = append(out, fmt.Sprintf("%.2fM", v/1e6))
	}
	return strings.Join(out, ", ")
}

// measure consumes every record once (a new group per pass).
func (r *throughputRow) measure(b testing.TB, pass int) {
	b.Helper()
	opts := append(r.opts(pass), kgo.ClientID(fmt.Sprintf("bench-%d", pass)))
	cpu0 := processCPU()
	start := time.Now()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for got := 0; got < r.records; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			b.Fatalf("%s: %d of %d records: %v", r.path, got, r.records, fs.Errors())
		}
		got += fs.NumRecords()
	}
	r.all = append(r.all, float64(r.records)/time.Since(start).Seconds())
	r.cpus = append(r.cpus, float64(processCPU()-cpu0)/float64(time.Millisecond)/(float64(r.records)/1e6))
	r.rps, r.cpu = median(r.all), median(r.cpus)
}

func median(v []float64) float64 {
	sorted := slices.Clone(v)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}

// processCPU is the user and system CPU time this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
