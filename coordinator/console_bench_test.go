package coordinator_test

import (
	"bufio"
	"net/http"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
)

// BenchmarkHeartbeatConsoleWatching: the heartbeat path with a console
// watching vs none, same run. 1,000 members heartbeat over HTTP as fast
// as they can (wait_ms=1) while an admin changes another group's config
// in a tight loop from 8 goroutines, so the timeline has events to carry.
// Phases alternate (none, watching, watching, none, …; 0.5 s each) so drift
// on a shared machine hits both alike, and each round's ratio pairs
// neighbours; "watching" is a logged-in console session with
// its live timeline stream open and read. Reports heartbeats/s and p99
// latency of each, their ratio overall and the median of the rounds'
// ratios with their quartiles (run with -benchtime 40x), and how many
// events the stream carried
// (which must be > 0: a watcher that saw nothing proves nothing).
func BenchmarkHeartbeatConsoleWatching(b *testing.B) {
	const members, phase = 1000, 500 * time.Millisecond
	e := newBenchEnv(b, map[string]int32{"orders": 10})
	// 1,000 members and the churn all connect from 127.0.0.1: one address
	// holding more than the default max_connections_per_address (1,000).
	e.cfg.MaxConnectionsPerAddress = e.cfg.MaxConnections
	h := e.start(b)
	creds := h.clientCredential(b, []string{"g"}, []string{"orders"})
	ms := joinMany(b, h, creds, "orders", members, 32)
	stopChurn := churnTimeline(b, h)
	defer stopChurn()
	c := newConsoleClient(b, h)
	if a := c.login(e.adminToken, nil); a.status != 303 {
		b.Fatalf("console login: %d", a.status)
	}

	heartbeatPhase(b, h, ms, phase) // warm-up: connections, caches, the held-heartbeat timer heap
	var none, watching []phaseResult
	var streamed int64
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			none = append(none, heartbeatPhase(b, h, ms, phase))
		}
		w := watch(b, h, c)
		watching = append(watching, heartbeatPhase(b, h, ms, phase))
		streamed += w.stop()
		if i%2 == 1 {
			none = append(none, heartbeatPhase(b, h, ms, phase))
		}
	}
	b.StopTimer()
	ratios := make([]float64, len(none))
	for i := range none {
		rn, rw := float64(none[i].count)/none[i].elapsed.Seconds(), float64(watching[i].count)/watching[i].elapsed.Seconds()
		ratios[i] = rw / rn
		if testing.Verbose() {
			b.Logf("round %d: none %.0f hb/s, watching %.0f hb/s, ratio %.3f", i, rn, rw, ratios[i])
		}
	}
	slices.Sort(ratios)
	if streamed == 0 {
		b.Fatal("the console's stream carried no event while watching")
	}
	n, w := merge(none), merge(watching)
	b.ReportMetric(n.rate, "hb/s-none")
	b.ReportMetric(w.rate, "hb/s-watching")
	b.ReportMetric(w.rate/n.rate, "x-throughput")
	b.ReportMetric(ratios[len(ratios)/2], "x-throughput-median-round")
	b.ReportMetric(ratios[len(ratios)/4], "x-q1-round")
	b.ReportMetric(ratios[len(ratios)*3/4], "x-q3-round")
	b.ReportMetric(float64(n.p99.Microseconds()), "p99-µs-none")
	b.ReportMetric(float64(w.p99.Microseconds()), "p99-µs-watching")
	b.ReportMetric(float64(streamed)/float64(b.N)/phase.Seconds(), "events/s-streamed")
}

type phaseResult struct {
	count     int64
	elapsed   time.Duration
	latencies []time.Duration
	rate      float64
	p99       time.Duration
}

// heartbeatPhase runs every member's heartbeat loop for d.
func heartbeatPhase(b *testing.B, h *harness, ms []*member, d time.Duration) phaseResult {
	workers := max(len(ms)/runtime.GOMAXPROCS(0), 1) * runtime.GOMAXPROCS(0)
	var count, failures atomic.Int64
	var mu sync.Mutex
	var latencies []time.Duration
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range min(workers, len(ms)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(deadline) {
				t0 := time.Now()
				status, _, _, err := h.try("POST", "/v1/groups/g/heartbeat", ms[i].token, `{"wait_ms":1}`)
				if err != nil || status != 200 {
					failures.Add(1)
					continue
				}
				mine = append(mine, time.Since(t0))
				count.Add(1)
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if n := failures.Load(); n > 0 {
		b.Fatalf("%d heartbeats failed", n)
	}
	return phaseResult{count: count.Load(), elapsed: time.Since(start), latencies: latencies}
}

func merge(phases []phaseResult) phaseResult {
	var out phaseResult
	for _, p := range phases {
		out.count += p.count
		out.elapsed += p.elapsed
		out.latencies = append(out.latencies, p.latencies...)
	}
	out.rate = float64(out.count) / out.elapsed.Seconds()
	slices.Sort(out.latencies)
	if n := len(out.latencies); n > 0 {
		out.p99 = out.latencies[n*99/100]
	}
	return out
}

// churnTimeline changes the creeping rate of groups churn-0 … churn-7 in
// a loop (one config event each) until stopped.
func churnTimeline(b *testing.B, h *harness) func() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := "/v1/admin/groups/churn-" + strconv.Itoa(g) + "/config"
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				moves := i % 2
				status, body, _, err := h.try("PUT", path, h.env.adminToken, coordinator.GroupConfigRequest{MaxMovesPerSecond: &moves})
				if err != nil || status != 200 {
					b.Errorf("churn: %v %d %s", err, status, body)
					return
				}
			}
		}()
	}
	return func() { close(stop); wg.Wait() }
}

// watcher is an open console stream read to the end by a goroutine.
type watcher struct {
	resp   *http.Response
	events atomic.Int64
	done   chan struct{}
}

var lastEvent = regexp.MustCompile(`data-last="(\d+)"`)

// watch opens the console's live timeline of every group, from the newest
// event on, as the timeline page does.
func watch(b *testing.B, h *harness, c *consoleClient) *watcher {
	page := c.send("GET", "/console/timeline", nil, nil)
	last := lastEvent.FindStringSubmatch(page.body)
	if page.status != 200 || last == nil {
		b.Fatalf("timeline page: %d", page.status)
	}
	req, _ := http.NewRequest("GET", h.base+"/console/events?after="+last[1], nil)
	req.AddCookie(&http.Cookie{Name: "capgate_console", Value: c.cookies["capgate_console"]})
	resp, err := h.client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("open the console stream: %v %v", err, resp)
	}
	w := &watcher{resp: resp, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		lines := bufio.NewScanner(resp.Body)
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), "data: ") {
				w.events.Add(1)
			}
		}
	}()
	return w
}

// stop closes the stream and returns how many events it carried.
func (w *watcher) stop() int64 {
	w.resp.Body.Close()
	<-w.done
	return w.events.Load()
}
