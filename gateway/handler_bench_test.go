package gateway

import (
	"context"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

// BenchmarkHandlerOneRecord runs the gateway's request handler alone (no
// socket, no fasthttp parsing or writing) on 1-record fetches of
// single-record batches read in a row, as BenchmarkDeploySeq's clients
// send them (max_bytes=1, answered from the read-ahead), JSON and raw,
// and on GET /healthz (the floor's handler): what capgate's own code
// costs a fetch beyond the HTTP exchange, in CPU and allocations.
func BenchmarkHandlerOneRecord(b *testing.B) { benchmarkHandler(b, false) }

// BenchmarkHandlerOneRecordCold is BenchmarkHandlerOneRecord with the
// caches cold: before each request the benchmark writes a buffer twice a
// core's L2 (as whatever else runs on the core between two requests
// does), and only the handler's own time counts: cold-p50-µs, the median
// request (a read-ahead refill now and then is not the handler's). One
// request at a time a deployed gateway runs its handler like this, which
// is why capgate's work above the floor costs it more than the warm loop
// shows (BENCHMARKS.md §0, "Twenty-eighth pass").
func BenchmarkHandlerOneRecordCold(b *testing.B) { benchmarkHandler(b, true) }

func benchmarkHandler(b *testing.B, cold bool) {
	h := newBenchHarness(b)
	const n = 2000
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range n {
		rec := &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("one record, one batch")}
		if _, err := h.kc.Produce(ctx, testTopic, 0, []*kgo.Record{rec}); err != nil {
			b.Fatal(err)
		}
	}
	tok, _ := h.mint(capClaims(0))
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	var evict []byte
	if cold {
		evict = make([]byte, 8<<20)
	}
	run := func(b *testing.B, uri func(i int) string, accept string) {
		var rc fasthttp.RequestCtx
		rc.Init(&fasthttp.Request{}, addr, nil)
		bearer := "Bearer " + tok
		var spent []time.Duration // cold only
		i := 0
		for b.Loop() {
			req := &rc.Request
			req.Reset()
			rc.Response.Reset()
			req.SetRequestURI(uri(i))
			req.Header.Set("Authorization", bearer)
			if accept != "" {
				req.Header.Set("Accept", accept)
			}
			if cold {
				for j := 0; j < len(evict); j += 64 {
					evict[j]++
				}
				start := time.Now()
				h.gw.serve(&rc)
				spent = append(spent, time.Since(start))
			} else {
				h.gw.serve(&rc)
			}
			if rc.Response.StatusCode() != fasthttp.StatusOK {
				b.Fatalf("%d %s", rc.Response.StatusCode(), rc.Response.Body())
			}
			i++
		}
		if cold {
			slices.Sort(spent)
			b.ReportMetric(float64(spent[len(spent)/2].Nanoseconds())/1e3, "cold-p50-µs")
		}
	}
	fetch := func(i int) string {
		return "/v1/topics/" + testTopic + "/partitions/0/records?max_bytes=1&offset=" + strconv.Itoa(i%n)
	}
	b.Run("json", func(b *testing.B) { run(b, fetch, "") })
	b.Run("raw", func(b *testing.B) { run(b, fetch, api.MediaRecordBatch) })
	b.Run("healthz", func(b *testing.B) { run(b, func(int) string { return "/healthz" }, "") })
}
