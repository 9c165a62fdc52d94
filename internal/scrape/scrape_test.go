package scrape

import (
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// TestAnswersAreNeverOlderThanTheirRequest: renders are shared, yet a
// request's answer always shows what happened before it was asked — a
// counter counted before a request is in its answer, however many ask
// at once — and the renders are fewer than the requests.
func TestAnswersAreNeverOlderThanTheirRequest(t *testing.T) {
	reg := prometheus.NewRegistry()
	var count atomic.Int64
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "acts_total", Help: "Acts."},
		func() float64 {
			v := count.Load()
			time.Sleep(2 * time.Millisecond) // a render takes a while: requests arrive during it
			return float64(v)
		}))
	a := New(func() prometheus.Gatherer { return reg })
	value := regexp.MustCompile(`(?m)^acts_total (\S+)$`)
	const askers, asks = 16, 5
	var wg sync.WaitGroup
	for range askers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range asks {
				done := count.Add(1)
				var ctx fasthttp.RequestCtx
				a.Serve(&ctx)
				m := value.FindSubmatch(ctx.Response.Body())
				if ctx.Response.StatusCode() != fasthttp.StatusOK || m == nil {
					t.Errorf("answer %d %q", ctx.Response.StatusCode(), ctx.Response.Body())
					return
				}
				if got, _ := strconv.ParseFloat(string(m[1]), 64); got < float64(done) {
					t.Errorf("an answer asked after the %dth act shows %v", done, got)
				}
			}
		}()
	}
	wg.Wait()
	if n := a.Renders(); n >= askers*asks {
		t.Errorf("%d requests, %d renders: none shared", askers*asks, n)
	}
	t.Logf("%d requests, %d renders", askers*asks, a.Renders())
}
