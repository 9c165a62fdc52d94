package gateway

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/broker"
)

// The benchmarks put the gateway next to franz-go fetching directly from
// the same kfake broker (broker.Client.Fetch, the path the gateway itself
// uses), at the same concurrency, in one run, and log the ratios.

func newBenchHarness(b *testing.B) *harness {
	h := newHarnessWith(b, harnessOptions{log: zap.NewNop(), edit: func(c *Config) { c.SyncWait, c.SyncTimeout = time.Second, 10*time.Second }})
	h.waitReady()
	return h
}

// gatewayClient is a lean HTTP client, so the client side adds little.
func gatewayClient(h *harness) *fasthttp.HostClient {
	return &fasthttp.HostClient{Addr: h.gw.Addr(), MaxConns: 8, ReadBufferSize: 64 << 10, MaxResponseBodySize: 64 << 20}
}

// gatewayFetch fetches through the gateway, reads the body, and returns
// the next offset (from the Capgate-Next-Offset header).
func gatewayFetch(b *testing.B, hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response, uri, token string, raw bool) int64 {
	req.Reset()
	req.SetRequestURI(uri)
	req.Header.Set("Authorization", "Bearer "+token)
	if raw {
		req.Header.Set("Accept", api.MediaRecordBatch)
	}
	resp.StreamBody = true
	if err := hc.Do(req, resp); err != nil || resp.StatusCode() != 200 {
		b.Fatalf("gateway fetch: %v %d", err, resp.StatusCode())
	}
	// Read the body as a consumer's socket would, without buffering it whole.
	if _, err := io.Copy(io.Discard, resp.BodyStream()); err != nil {
		b.Fatal(err)
	}
	_ = resp.CloseBodyStream()
	next, err := strconv.ParseInt(string(resp.Header.Peek(api.HeaderNextOffset)), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return next
}

// latencies runs f in a b.Loop and reports p50 and p99 in microseconds.
func latencies(b *testing.B, f func()) (p50, p99 time.Duration) {
	var d []time.Duration
	for b.Loop() {
		start := time.Now()
		f()
		d = append(d, time.Since(start))
	}
	slices.Sort(d)
	p50, p99 = d[len(d)/2], d[len(d)*99/100]
	b.ReportMetric(float64(p50.Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(p99.Nanoseconds())/1e3, "p99-µs")
	return p50, p99
}

// BenchmarkFetchOneRecordLatency: one sequential 1-record fetch, direct
// versus through the gateway (JSON and raw).
func BenchmarkFetchOneRecordLatency(b *testing.B) {
	h := newBenchHarness(b)
	h.produce(0, 1)
	tok, _ := h.mint(capClaims(0))
	hc := gatewayClient(h)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	uri := "http://" + h.gw.Addr() + recordsPath(0, "offset=0")
	type pct struct{ p50, p99 time.Duration }
	res := map[string]pct{}
	b.Run("direct-franz-go", func(b *testing.B) {
		p50, p99 := latencies(b, func() {
			r, err := h.kc.Fetch(context.Background(), broker.FetchRequest{Topic: testTopic, Partition: 0, Offset: 0})
			if err != nil || len(r.Records) != 1 {
				b.Fatalf("direct fetch: %v, %d records", err, len(r.Records))
			}
		})
		res["direct"] = pct{p50, p99}
	})
	for _, raw := range []bool{false, true} {
		name := map[bool]string{false: "gateway-json", true: "gateway-raw"}[raw]
		b.Run(name, func(b *testing.B) {
			p50, p99 := latencies(b, func() {
				if gatewayFetch(b, hc, req, resp, uri, tok, raw) != 1 {
					b.Fatal("next offset")
				}
			})
			res[name] = pct{p50, p99}
		})
	}
	d := res["direct"]
	for _, name := range []string{"gateway-json", "gateway-raw"} {
		g := res[name]
		b.Logf("%s: p50 %v (direct %v, +%v, x%.2f); p99 %v (direct %v, +%v, x%.2f)", name,
			g.p50, d.p50, g.p50-d.p50, float64(g.p50)/float64(d.p50), g.p99, d.p99, g.p99-d.p99, float64(g.p99)/float64(d.p99))
	}
}

const throughputRecords = 100_000

// BenchmarkFetchThroughput: one consumer reads 100,000 records of 100
// bytes from offset 0 to the end, 1 MiB per fetch; records/s, direct
// (decoded and raw) versus the gateway (JSON and raw).
func BenchmarkFetchThroughput(b *testing.B) {
	h := newBenchHarness(b)
	produceBulk(b, h, 1, throughputRecords, 100)
	tok, _ := h.mint(capClaims(1))
	hc := gatewayClient(h)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	rates := map[string]float64{}
	scan := func(name string, fetch func(offset int64) int64) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				for offset := int64(0); offset < throughputRecords; {
					offset = fetch(offset)
				}
			}
			rates[name] = float64(throughputRecords*b.N) / b.Elapsed().Seconds()
			b.ReportMetric(rates[name], "records/s")
		})
	}
	direct := func(raw bool) func(int64) int64 {
		return func(offset int64) int64 {
			r, err := h.kc.Fetch(context.Background(), broker.FetchRequest{Topic: testTopic, Partition: 1, Offset: offset, MaxBytes: 1 << 20, Raw: raw})
			if err != nil || r.NextOffset <= offset {
				b.Fatalf("direct fetch at %d: %v", offset, err)
			}
			return r.NextOffset
		}
	}
	through := func(raw bool) func(int64) int64 {
		return func(offset int64) int64 {
			return gatewayFetch(b, hc, req, resp, fmt.Sprintf("http://%s%s", h.gw.Addr(), recordsPath(1, "max_bytes=1048576&offset="+strconv.FormatInt(offset, 10))), tok, raw)
		}
	}
	scan("direct-decoded", direct(false))
	scan("direct-raw", direct(true))
	scan("gateway-json", through(false))
	scan("gateway-raw", through(true))
	b.Logf("records/s: direct decoded %.3gM, direct raw %.3gM, gateway JSON %.3gM (x%.2f of direct decoded), gateway raw %.3gM (x%.2f of direct raw)",
		rates["direct-decoded"]/1e6, rates["direct-raw"]/1e6, rates["gateway-json"]/1e6, rates["gateway-json"]/rates["direct-decoded"],
		rates["gateway-raw"]/1e6, rates["gateway-raw"]/rates["direct-raw"])
}

// produceBulk writes n uncompressed records of valueBytes random bytes to
// orders/p, as the DESIGN's throughput figures assume.
func produceBulk(b *testing.B, h *harness, p int32, n, valueBytes int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.kafka.Addrs()...), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	r := rand.New(rand.NewPCG(1, 1))
	for done := 0; done < n; {
		batch := make([]*kgo.Record, min(10_000, n-done))
		for i := range batch {
			value := make([]byte, valueBytes)
			for j := range value {
				value[j] = byte(r.Uint32())
			}
			batch[i] = &kgo.Record{Topic: testTopic, Partition: p, Key: []byte(strconv.Itoa(done + i)), Value: value}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := cl.ProduceSync(ctx, batch...).FirstErr()
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		done += len(batch)
	}
}
