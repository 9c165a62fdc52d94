package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/coordinator"
)

// Topics of the overhead scenario: latency holds one record per batch, so
// a fetch with max_bytes=1 returns exactly one record; throughput holds
// 100-byte records in large batches.
const (
	latencyTopic    = "latency"
	throughputTopic = "throughput"
)

// overheadEnv is a stack with both topics loaded and a fetch capability
// for each partition (admin shared grants).
type overheadEnv struct {
	s           *deployment
	hc          *fasthttp.HostClient
	latencyLen  int64
	perPart     int
	throughputN int32
	valueSize   int
	caps        map[string]string // topic/partition -> capability
}

// overheadSize is how much data the overhead scenario loads.
type overheadSize struct {
	LatencyRecords      int   // single-record batches in latency/0
	ThroughputParts     int32 // partitions of throughput
	ThroughputPerPart   int   // 100-byte records per partition
	ThroughputValueSize int
}

func startOverhead(tb testing.TB, size overheadSize) *overheadEnv {
	tb.Helper()
	s := startDeployment(tb, deploymentOptions{
		Topics:   map[string]int32{latencyTopic: 1, throughputTopic: size.ThroughputParts},
		Gateways: 1,
	})
	e := &overheadEnv{s: s, latencyLen: int64(size.LatencyRecords), perPart: size.ThroughputPerPart,
		throughputN: size.ThroughputParts, valueSize: size.ThroughputValueSize, caps: map[string]string{}}
	e.hc = newHostClient(s.GatewayURLs()[0])
	produceOneByOne(tb, s.Broker, latencyTopic, size.LatencyRecords)
	produceBulk(tb, s.Kafka.Addrs(), throughputTopic, size.ThroughputParts, size.ThroughputPerPart, size.ThroughputValueSize)
	e.grant(tb, latencyTopic, 0)
	for p := range size.ThroughputParts {
		e.grant(tb, throughputTopic, p)
	}
	return e
}

// newHostClient is a lean HTTP client for one gateway, so that the client
// side adds little to what is measured.
func newHostClient(url string) *fasthttp.HostClient {
	return &fasthttp.HostClient{Addr: strings.TrimPrefix(url, "http://"), MaxConns: 1024,
		ReadBufferSize: 64 << 10, MaxResponseBodySize: 64 << 20}
}

// grant mints a fetch capability for one partition through the admin API.
func (e *overheadEnv) grant(tb testing.TB, topic string, partition int32) {
	var resp api.CapabilityResponse
	req := coordinator.SharedGrantRequest{Topic: topic, Partition: partition, Ops: []string{"fetch"}, TTLMs: (10 * time.Minute).Milliseconds(), Holder: "bench"}
	if _, err := e.s.admin(http.MethodPost, "/v1/admin/capabilities", req, &resp); err != nil {
		tb.Fatalf("grant %s/%d: %v", topic, partition, err)
	}
	e.caps[topic+"/"+strconv.Itoa(int(partition))] = resp.Capability
}

// produceOneByOne writes n records to topic/0, each in its own batch.
func produceOneByOne(tb testing.TB, client *broker.Client, topic string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range n {
		rec := &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("one record, one batch")}
		if _, err := client.Produce(ctx, topic, 0, []*kgo.Record{rec}); err != nil {
			tb.Fatalf("produce %s: %v", topic, err)
		}
	}
}

// produceBulk writes perPart uncompressed records of valueSize random
// bytes to every partition of topic.
func produceBulk(tb testing.TB, seeds []string, topic string, parts int32, perPart, valueSize int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20), kgo.DefaultProduceTopic(topic))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(1, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for p := range parts {
		for done := 0; done < perPart; {
			batch := make([]*kgo.Record, min(10_000, perPart-done))
			for i := range batch {
				value := make([]byte, valueSize)
				for j := range value {
					value[j] = byte(rng.Uint32())
				}
				batch[i] = &kgo.Record{Partition: p, Key: []byte(strconv.Itoa(done + i)), Value: value}
			}
			if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
				tb.Fatalf("produce %s/%d: %v", topic, p, err)
			}
			done += len(batch)
		}
	}
}

// fetchOne is one 1-record fetch of record i (modulo the partition's
// length), directly or through the gateway.
type fetchOne func(i int) error

func (e *overheadEnv) directFetch(raw bool) fetchOne {
	return func(i int) error {
		offset := int64(i) % e.latencyLen
		res, err := e.s.Broker.Fetch(context.Background(), broker.FetchRequest{Topic: latencyTopic, Offset: offset, MaxBytes: 1, Raw: raw})
		switch {
		case err != nil:
			return err
		case res.NextOffset != offset+1:
			return fmt.Errorf("direct fetch at %d: next offset %d", offset, res.NextOffset)
		}
		return nil
	}
}

func (e *overheadEnv) gatewayFetch(raw bool) fetchOne {
	return httpFetch(e.hc, e.caps[latencyTopic+"/0"], latencyTopic, 0, e.latencyLen, raw)
}

// loadResult is one open-loop run at a fixed request rate.
type loadResult struct {
	Rate      float64 // requests/s asked for
	Achieved  float64 // completed requests/s
	Sent      int
	Failed    int
	Dropped   int // not sent: MaxInflight requests were already waiting
	P50, P99  time.Duration
	Max       time.Duration
	FirstFail error
}

// openLoop sends requests at a fixed rate for d, whatever the answers
// take (each in its own goroutine, at most maxInflight at once), and
// measures each from when it was sent until it was answered.
func openLoop(rate float64, d time.Duration, maxInflight int, do fetchOne) loadResult {
	interval := time.Duration(float64(time.Second) / rate)
	n := int(d / interval)
	lat := make([]time.Duration, n)
	res := loadResult{Rate: rate}
	var mu sync.Mutex
	sem := make(chan struct{}, maxInflight)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait) // the schedule is the load
		}
		select {
		case sem <- struct{}{}:
		default:
			res.Dropped++
			lat[i] = -1
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := time.Now()
			err := do(i)
			lat[i] = time.Since(sent)
			<-sem
			if err != nil {
				mu.Lock()
				res.Failed++
				if res.FirstFail == nil {
					res.FirstFail = err
				}
				mu.Unlock()
				lat[i] = -1
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	ok := slices.DeleteFunc(lat, func(l time.Duration) bool { return l < 0 })
	res.Sent = n - res.Dropped
	res.Achieved = float64(len(ok)) / elapsed.Seconds()
	res.P50, res.P99, res.Max = quantiles(ok)
	return res
}

// quantiles sorts ds and returns p50, p99 and the maximum.
func quantiles(ds []time.Duration) (p50, p99, most time.Duration) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)*99/100], ds[len(ds)-1]
}
