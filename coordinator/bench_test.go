package coordinator_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// joinMany joins n members to group g over topic with `workers` joins in
// flight, returning them. The first few join one by one so the group
// settles before the crowd arrives.
func joinMany(b *testing.B, h *harness, creds, topic string, n, workers int) []*member {
	b.Helper()
	members := make([]*member, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				var resp api.JoinResponse
				status, body, _, err := h.try("POST", "/v1/groups/g/join", creds, api.JoinRequest{ClientID: fmt.Sprintf("m%d", i), Topics: []string{topic}})
				if err != nil || status != 200 || json.Unmarshal(body, &resp) != nil {
					failed.Store(fmt.Sprintf("join %d: %v %d %s", i, err, status, body))
					return
				}
				members[i] = &member{h: h, group: "g", id: resp.MemberID, token: resp.MemberToken, grants: map[string]api.Grant{}}
			}
		}()
	}
	wg.Wait()
	if msg := failed.Load(); msg != nil {
		b.Fatal(msg)
	}
	return members
}

// newBenchEnv is newEnv without logs and without the per-credential
// limits on joins: a benchmark joins hundreds of members, or members of
// hundreds of groups, with one credential as fast as it can, which the
// limits (rightly) refuse from a tenant.
func newBenchEnv(b *testing.B, topics map[string]int32) *env {
	e := newEnv(b, topics)
	e.log = nopLogger()
	e.cfg.JoinRate, e.cfg.JoinBurst = 1e6, 1e6
	l := &e.cfg.Groups.Limits
	l.GroupsPerCredential, l.Groups = 1<<20, 1<<20
	return e
}

// BenchmarkHeartbeatThroughput: 1,000 members heartbeat over HTTP as fast
// as they can (wait_ms=1: each heartbeat is held 1 ms by the machine's
// timer). Baseline: GET /healthz at the same concurrency (HTTP only, no
// event loop, no token check).
func BenchmarkHeartbeatThroughput(b *testing.B) {
	const members = 1000
	e := newBenchEnv(b, map[string]int32{"orders": 10})
	h := e.start(b)
	creds := h.clientCredential(b, []string{"g"}, []string{"orders"})
	ms := joinMany(b, h, creds, "orders", members, 32)
	parallelism := max(members/runtime.GOMAXPROCS(0), 1)

	run := func(name string, request func(i int) error) float64 {
		var idx atomic.Int64
		var failures atomic.Int64
		start := time.Now()
		b.SetParallelism(parallelism)
		b.RunParallel(func(pb *testing.PB) {
			i := int(idx.Add(1)-1) % members
			for pb.Next() {
				if request(i) != nil {
					failures.Add(1)
				}
			}
		})
		if n := failures.Load(); n > 0 {
			b.Fatalf("%s: %d failed requests", name, n)
		}
		return float64(b.N) / time.Since(start).Seconds()
	}
	b.ResetTimer()
	heartbeats := run("heartbeat", func(i int) error {
		status, body, _, err := h.try("POST", "/v1/groups/g/heartbeat", ms[i].token, `{"wait_ms":1}`)
		if err == nil && status != 200 {
			err = fmt.Errorf("%d %s", status, body)
		}
		return err
	})
	b.StopTimer()
	health := run("healthz", func(int) error {
		_, _, _, err := h.try("GET", "/healthz", "", nil)
		return err
	})
	b.ReportMetric(heartbeats, "heartbeats/s")
	b.ReportMetric(health, "healthz/s")
	b.ReportMetric(heartbeats/health, "x-healthz")
}

// BenchmarkJoin: 1,000 members join one group of 10,000 partitions (32
// joins in flight): wall time and heap growth of the coordinator process.
// Baseline: the same 1,000 joins to a group of 10 partitions.
func BenchmarkJoin(b *testing.B) {
	measure := func(partitions int32) (time.Duration, float64) {
		b.StopTimer()
		e := newBenchEnv(b, map[string]int32{"big": partitions})
		e.cfg.Groups.SyncLogMax = 100000
		h := e.start(b)
		creds := h.clientCredential(b, []string{"g"}, []string{"big"})
		before := heapInUse()
		b.StartTimer()
		start := time.Now()
		ms := joinMany(b, h, creds, "big", 1000, 32)
		elapsed := time.Since(start)
		b.StopTimer()
		heap := float64(heapInUse()-before) / (1 << 20)
		runtime.KeepAlive(ms)
		h.stop(b)
		b.StartTimer()
		return elapsed, heap
	}
	var big, small time.Duration
	var bigHeap, smallHeap float64
	for range b.N {
		t, heap := measure(10000)
		big, bigHeap = big+t, bigHeap+heap
		t, heap = measure(10)
		small, smallHeap = small+t, smallHeap+heap
	}
	n := float64(b.N)
	b.ReportMetric(big.Seconds()*1000/n, "ms/1000-joins-10k-partitions")
	b.ReportMetric(bigHeap/n, "heap-MB-10k-partitions")
	b.ReportMetric(small.Seconds()*1000/n, "ms/1000-joins-10-partitions")
	b.ReportMetric(smallHeap/n, "heap-MB-10-partitions")
	b.ReportMetric(big.Seconds()/small.Seconds(), "x-10-partitions")
}

func heapInUse() int64 {
	runtime.GC()
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	return int64(s.HeapInuse)
}

// BenchmarkFencePropagation: an admin partition revoke answers once every
// gateway acknowledged the fence; its latency is the fence's propagation
// to all gateways. One member owns 64 partitions and releases every
// revoke at once, so each partition is owned again when its turn comes.
// Baseline: an admin request through the event loop with nothing to wait
// for (GET /v1/admin/gateways).
func BenchmarkFencePropagation(b *testing.B) {
	for _, pollers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("pollers=%d", pollers), func(b *testing.B) {
			fencePropagation(b, pollers)
		})
	}
}

func fencePropagation(b *testing.B, pollers int) {
	const partitions = 64
	e := newBenchEnv(b, map[string]int32{"orders": partitions})
	h := e.start(b)
	for i := range pollers {
		gw := newGateway(h, fmt.Sprintf("gw%d", i))
		gw.run(1000)
		b.Cleanup(gw.halt)
	}
	creds := h.clientCredential(b, []string{"g"}, []string{"orders"})
	m := h.join(b, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	stop := make(chan struct{})
	defer close(stop)
	go releaseLoop(m, stop)
	eventually(b, func() string {
		var gws coordinator.GatewaysResponse
		h.call(b, "GET", "/v1/admin/gateways", e.adminToken, nil, 200, &gws)
		if len(gws.Gateways) != pollers {
			return "gateways not registered"
		}
		return ""
	})

	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		path := fmt.Sprintf("/v1/admin/groups/g/partitions/orders/%d/revoke", i%partitions)
		start := time.Now()
		status, body, _ := h.do(b, "POST", path, e.adminToken, nil)
		latencies = append(latencies, time.Since(start))
		if status != 200 {
			b.Fatalf("revoke: %d %s", status, body)
		}
	}
	b.StopTimer()
	base := make([]time.Duration, 0, 200)
	for range 200 {
		start := time.Now()
		h.do(b, "GET", "/v1/admin/gateways", e.adminToken, nil)
		base = append(base, time.Since(start))
	}
	p50, p99 := percentile(latencies, 50), percentile(latencies, 99)
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(p50)/float64(percentile(base, 50)), "x-admin-rtt-p50")
}

// releaseLoop heartbeats m and releases every revoked partition without
// committing, until stop.
func releaseLoop(m *member, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		resp, err := m.tryHeartbeat(500)
		if err != nil {
			return
		}
		for _, r := range resp.Revoke {
			g, ok := m.grant(r.Topic, r.Partition)
			if !ok {
				continue
			}
			m.h.try("POST", "/v1/groups/g/commit", m.token, api.CommitRequest{
				Offsets: []api.CommitOffset{{Topic: r.Topic, Partition: r.Partition, Offset: -1, Capability: g.Capability}},
				Release: true,
			})
		}
	}
}

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)*p/100, len(s)-1)]
}

func nopLogger() *zap.Logger { return zap.NewNop() }
