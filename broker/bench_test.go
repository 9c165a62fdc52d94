package broker

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Throughput benchmarks read benchRecords records of 100-byte values from
// one partition, start to end, once per op, from two sources:
//
//   - log: a kfake partition prefilled with uncompressed random values, so
//     the in-process broker reads its log for every fetch;
//   - synthetic: kfake's SyntheticFetch, serving copies of one canned 1 MiB
//     batch, so nearly all the CPU left is the client's.
//
// BenchmarkKgoDirect (a franz-go consumer, fetching ahead in the
// background) is the baseline; run it in the same invocation and the others
// report vs_kgo, their records/s as a fraction of the baseline's:
//
//	go test ./broker -run '^$' -bench . -benchtime 20x
const (
	benchTopic   = "bench"
	benchRecords = 200_000
	// latencyTopic holds latencyRecords records, one per batch, so a
	// fetch with MaxBytes 1 returns exactly one record.
	latencyTopic   = "bench-latency"
	latencyRecords = 500
	benchValue     = 100
	benchFetch     = 8 << 20 // bytes per fetch, ours and kgo's alike
)

var (
	benchOnce     sync.Once
	benchClusters map[string]*Embedded // by source
	benchErr      error
	baselineMu    sync.Mutex
	baselineRecsS = map[string]float64{} // records/s of BenchmarkKgoDirect, by source
	benchSources  = []string{"log", "synthetic"}
)

// benchFixture starts (once per process) both clusters. They live until
// the test binary exits.
func benchFixture(b *testing.B) map[string]*Embedded {
	b.Helper()
	benchOnce.Do(func() {
		benchClusters = map[string]*Embedded{}
		topics := map[string]int32{benchTopic: 1, latencyTopic: 1}
		if benchClusters["log"], benchErr = StartEmbedded(EmbeddedConfig{Topics: topics}); benchErr != nil {
			return
		}
		if benchErr = prefill(benchClusters["log"].Addrs()); benchErr != nil {
			return
		}
		benchClusters["synthetic"], benchErr = StartEmbedded(EmbeddedConfig{Topics: topics,
			Options: []kfake.Opt{kfake.SyntheticFetch(kfake.SyntheticBatch{})}})
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchClusters
}

// prefill writes the benchmark partitions, uncompressed, with random
// values so that nothing compresses away.
func prefill(seeds []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(7, 7))
	value := func() []byte {
		v := make([]byte, benchValue)
		for i := range v {
			v[i] = byte(rng.Uint32())
		}
		return v
	}
	recs := make([]*kgo.Record, benchRecords)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: benchTopic, Value: value()}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		return err
	}
	for range latencyRecords { // one batch each
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: latencyTopic, Value: value()}).FirstErr(); err != nil {
			return err
		}
	}
	return nil
}

// reportThroughput reports records/s and, when the baseline ran, vs_kgo.
func reportThroughput(b *testing.B, source string, baseline bool) {
	recsPerSec := float64(b.N) * benchRecords / b.Elapsed().Seconds()
	b.ReportMetric(recsPerSec, "records/s")
	baselineMu.Lock()
	defer baselineMu.Unlock()
	if baseline {
		baselineRecsS[source] = recsPerSec
	} else if base := baselineRecsS[source]; base > 0 {
		b.ReportMetric(recsPerSec/base, "vs_kgo")
	}
}

func BenchmarkKgoDirect(b *testing.B) {
	clusters := benchFixture(b)
	for _, source := range benchSources {
		b.Run(source, func(b *testing.B) { benchmarkKgoDirect(b, clusters[source], source) })
	}
}

func benchmarkKgoDirect(b *testing.B, e *Embedded, source string) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(e.Addrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{benchTopic: {0: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxBytes(benchFetch),
		kgo.FetchMaxPartitionBytes(benchFetch),
		kgo.BrokerMaxReadBytes(2*benchFetch),
	)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for n := 0; n < benchRecords; {
			fs := cl.PollFetches(context.Background())
			if err := fs.Err0(); err != nil {
				b.Fatal(err)
			}
			n += fs.NumRecords()
		}
		cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{benchTopic: {0: {Epoch: -1, Offset: 0}}})
	}
	reportThroughput(b, source, true)
}

func benchmarkFetch(b *testing.B, raw bool) {
	clusters := benchFixture(b)
	for _, source := range benchSources {
		b.Run(source, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Seeds = clusters[source].Addrs()
			cfg.MaxFetchBytes = benchFetch
			c, err := New(cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for offset := int64(0); offset < benchRecords; {
					res, err := c.Fetch(ctx, FetchRequest{Topic: benchTopic, Offset: offset, Raw: raw})
					if err != nil {
						b.Fatal(err)
					}
					offset = res.NextOffset
				}
			}
			reportThroughput(b, source, false)
		})
	}
}

func BenchmarkFetchRaw(b *testing.B)     { benchmarkFetch(b, true) }
func BenchmarkFetchDecoded(b *testing.B) { benchmarkFetch(b, false) }

// Latency of one 1-record fetch, sequential: a raw kmsg.FetchRequest on a
// plain kgo client is the baseline, our Fetch adds routing and the pool.
func BenchmarkKgoRequestOneRecord(b *testing.B) {
	e := benchFixture(b)["log"]
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Addrs()...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	cfg := DefaultConfig()
	cfg.Seeds, cfg.ClientID, cfg.MaxFetchBytes, cfg.FetchConnectionsPerBroker = e.Addrs(), "bench", 1<<20, 1
	c, err := New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	r, err := c.meta.route(context.Background(), latencyTopic, 0, false)
	if err != nil {
		b.Fatal(err)
	}
	broker := cl.Broker(int(r.leader))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		req := c.fetchRequest(r, &FetchRequest{Topic: latencyTopic, Offset: int64(i % latencyRecords), MaxBytes: 1}, -1)
		if _, err := broker.Request(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
	reportLatency(b, true)
}

func BenchmarkFetchOneRecord(b *testing.B) {
	c := benchClient(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		res, err := c.Fetch(context.Background(), FetchRequest{Topic: latencyTopic, Offset: int64(i % latencyRecords), MaxBytes: 1, Raw: true})
		if err != nil || res.NextOffset != int64(i%latencyRecords)+1 {
			b.Fatalf("fetch %d: next %d, %v", i, res.NextOffset, err)
		}
	}
	reportLatency(b, false)
}

var baselineNsOp float64

// reportLatency reports the added latency per fetch against the baseline.
func reportLatency(b *testing.B, baseline bool) {
	nsOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	baselineMu.Lock()
	defer baselineMu.Unlock()
	if baseline {
		baselineNsOp = nsOp
	} else if baselineNsOp > 0 {
		b.ReportMetric(nsOp/baselineNsOp, "vs_kgo")
		b.ReportMetric((nsOp-baselineNsOp)/1e3, "added_µs")
	}
}

// BenchmarkFetchAheadHit is 1-record fetches of single-record batches
// read in a row, raw and decoded, as a gateway's one-at-a-time readers
// send them: nearly all answered from the read-ahead (a fill every
// few hundred), each result released as the gateway releases it.
func BenchmarkFetchAheadHit(b *testing.B) {
	c := benchClient(b)
	for _, raw := range []bool{true, false} {
		b.Run(map[bool]string{true: "raw", false: "json"}[raw], func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				offset := int64(i % latencyRecords)
				res, err := c.Fetch(context.Background(), FetchRequest{Topic: latencyTopic, Offset: offset, MaxBytes: 1, Raw: raw})
				if err != nil || res.NextOffset != offset+1 {
					b.Fatalf("fetch %d: next %d, %v", offset, res.NextOffset, err)
				}
				res.Release()
				i++
			}
			hits := c.FetchAheadStats().Hits.Load()
			b.ReportMetric(float64(hits), "hits")
		})
	}
}

// benchClient is a client of the fixture's "log" cluster with the
// default configuration, closed when b ends.
func benchClient(b *testing.B) *Client {
	e := benchFixture(b)["log"]
	cfg := DefaultConfig()
	cfg.Seeds = e.Addrs()
	c, err := New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c
}
