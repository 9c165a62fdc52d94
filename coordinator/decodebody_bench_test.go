package coordinator

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

// decodeBodyBaseline is decodeBody's decoding before api.StrictJSON
// (encoding/json with DisallowUnknownFields, trailing data refused): the
// baseline BenchmarkDecodeBody measures the strict check against.
func decodeBodyBaseline(body []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data")
	}
	return nil
}

// BenchmarkDecodeBody is decodeBody (Content-Type check, api.StrictJSON)
// on a join and a heartbeat body as the SDK sends them, against the
// baseline decode in the same run: the two alternate in chunks of
// decodeBodyChunk, so a busy machine slows both alike. It reports each
// one's ns and allocations per body, the strict check's added ns and the
// ratio (ns/op and allocs/op cover decodeBodyChunk bodies of each).
func BenchmarkDecodeBody(b *testing.B) {
	const decodeBodyChunk = 256
	bodies := []struct {
		name string
		body string
		dst  func() any
	}{
		{"join", `{"client_id":"svc-7","instance_id":"svc-7-0","topics":["orders","payments"],"session_timeout_ms":10000,"assignor":"sticky"}`,
			func() any { return new(api.JoinRequest) }},
		{"heartbeat", `{"wait_ms":3000}`, func() any {
			return new(struct {
				WaitMs *int64 `json:"wait_ms"`
			})
		}},
	}
	for _, bc := range bodies {
		b.Run(bc.name, func(b *testing.B) {
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetContentType("application/json")
			ctx.Request.SetBodyString(bc.body)
			var strict, baseline time.Duration
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				for range decodeBodyChunk {
					if !decodeBody(&ctx, bc.dst(), false) {
						b.Fatalf("refused: %s", ctx.Response.Body())
					}
				}
				mid := time.Now()
				for range decodeBodyChunk {
					if !api.IsJSON(ctx.Request.Header.ContentType()) || decodeBodyBaseline(ctx.PostBody(), bc.dst()) != nil {
						b.Fatal("refused")
					}
				}
				strict += mid.Sub(start)
				baseline += time.Since(mid)
			}
			n := float64(b.N * decodeBodyChunk)
			b.ReportMetric(float64(strict.Nanoseconds())/n, "strict-ns/body")
			b.ReportMetric(float64(baseline.Nanoseconds())/n, "baseline-ns/body")
			b.ReportMetric(float64((strict-baseline).Nanoseconds())/n, "added-ns/body")
			b.ReportMetric(float64(strict)/float64(baseline), "ratio")
			b.ReportMetric(testing.AllocsPerRun(100, func() { decodeBody(&ctx, bc.dst(), false) }), "strict-allocs/body")
			b.ReportMetric(testing.AllocsPerRun(100, func() {
				_ = api.IsJSON(ctx.Request.Header.ContentType()) && decodeBodyBaseline(ctx.PostBody(), bc.dst()) == nil
			}), "baseline-allocs/body")
		})
	}
}
