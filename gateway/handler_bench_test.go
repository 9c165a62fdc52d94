package gateway

import (
	"context"
	"net"
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
func BenchmarkHandlerOneRecord(b *testing.B) {
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
	run := func(b *testing.B, uri func(i int) string, accept string) {
		var rc fasthttp.RequestCtx
		rc.Init(&fasthttp.Request{}, addr, nil)
		bearer := "Bearer " + tok
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
			h.gw.serve(&rc)
			if rc.Response.StatusCode() != fasthttp.StatusOK {
				b.Fatalf("%d %s", rc.Response.StatusCode(), rc.Response.Body())
			}
			i++
		}
	}
	fetch := func(i int) string {
		return "/v1/topics/" + testTopic + "/partitions/0/records?max_bytes=1&offset=" + strconv.Itoa(i%n)
	}
	b.Run("json", func(b *testing.B) { run(b, fetch, "") })
	b.Run("raw", func(b *testing.B) { run(b, fetch, api.MediaRecordBatch) })
	b.Run("healthz", func(b *testing.B) { run(b, func(int) string { return "/healthz" }, "") })
}
