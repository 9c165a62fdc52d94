package coordinator_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// BenchmarkVictimBesideSpinningTenant is redteam13 #1 measured: tenant A
// has 100 members and spins heartbeats (wait_ms 0) from 200 keep-alive
// connections; tenant B's one member heartbeats (wait_ms 0) one at a
// time (400 times, or for 3 s). Reported: B's mean and p99 heartbeat latency quiet and beside A,
// their ratio, and A's heartbeats answered per second: with the tenant
// loop share and member rate off (off: a share and rate no tenant
// reaches), at their defaults (share 16, 5,000/s), and with a rate of
// 500/s. Run with -benchtime=1x under the bench lock; the
// attacker's client runs in the same process (the 2 cores are shared).
func BenchmarkVictimBesideSpinningTenant(b *testing.B) {
	for _, mode := range []struct {
		name        string
		share       int
		rate, burst float64
	}{{"off", 1 << 20, 1e9, 1e9}, {"defaults", 16, 5000, 10000}, {"rate=500", 16, 500, 500}} {
		b.Run(mode.name, func(b *testing.B) {
			for range b.N {
				victimBesideSpinner(b, mode.share, mode.rate, int(mode.burst))
			}
		})
	}
}

func victimBesideSpinner(b *testing.B, share int, rate float64, burst int) {
	const members, conns = 100, 200
	e := newBenchEnv(b, map[string]int32{"orders": 10})
	e.cfg.TenantLoopShare, e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = share, rate, burst
	h := e.start(b)
	attackers := joinMany(b, h, h.clientCredential(b, []string{"g"}, []string{"orders"}), "orders", members, 16)
	victim := h.join(b, "v", h.clientCredential(b, []string{"v"}, []string{"orders"}), api.JoinRequest{Topics: []string{"orders"}})
	victim.heartbeat(b, 0)
	victimBeside(b, h, victim, false, "attacker-hb/s", conns, 2*conns, func(i int) (int, error) { // every connection up and spinning
		status, _, _, err := h.try("POST", "/v1/groups/g/heartbeat", attackers[i%members].token, `{"wait_ms":0}`)
		return status, err
	})
}

// BenchmarkVictimBesideReadingTenant is redteam14 #3 measured: tenant A
// describes its group of 120 members with 1,000 topics each (of 1
// partition; GET
// /v1/groups/big, the route Kafka's DescribeGroups asks) over and over
// from two connections, the reads it may have in progress; tenant B's
// member heartbeats (wait_ms 0) one at a time. Reported as
// BenchmarkVictimBesideSpinningTenant's figures, with A's describes
// answered per second: the reads' rate off (no tenant_member_rate a
// tenant reaches) and at the defaults (each read spends a token per 100
// items it walks).
func BenchmarkVictimBesideReadingTenant(b *testing.B) {
	for _, mode := range []struct {
		name        string
		rate, burst float64
	}{{"off", 1e9, 1e9}, {"defaults", 5000, 10000}} {
		b.Run(mode.name, func(b *testing.B) {
			for range b.N {
				victimBesideReader(b, mode.rate, int(mode.burst))
			}
		})
	}
}

func victimBesideReader(b *testing.B, rate float64, burst int) {
	const members, topics, conns = 120, 1000, 2
	names := make([]string, topics)
	all := map[string]int32{"orders": 1}
	for i := range names {
		names[i] = fmt.Sprintf("a-%04d-%s", i, strings.Repeat("x", 200))
		all[names[i]] = 1
	}
	e := newBenchEnv(b, all)
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = rate, burst
	h := e.start(b)
	credA := h.clientCredential(b, []string{"big"}, []string{"a-*"})
	for i := range members {
		if status, body, _, err := h.try("POST", "/v1/groups/big/join", credA, api.JoinRequest{ClientID: fmt.Sprintf("m%d", i), Topics: names}); err != nil || status != 200 {
			b.Fatalf("join %d: %v %d %.300s", i, err, status, body)
		}
	}
	victim := h.join(b, "v", h.clientCredential(b, []string{"v"}, []string{"orders"}), api.JoinRequest{Topics: []string{"orders"}})
	victim.heartbeat(b, 0)
	// Beside A for the whole window: it holds A's reads at their rate,
	// not only its burst.
	victimBeside(b, h, victim, true, "attacker-reads/s", conns, 2, func(int) (int, error) { // the reads under way
		status, _, _, err := h.try("GET", "/v1/groups/big", credA, nil)
		return status, err
	})
}

// victimBeside measures B's heartbeats quiet, then beside A's requests
// spinning on conns connections (spin; whole: for the whole window), and
// reports B's figures and A's answered a second as unit.
func victimBeside(b *testing.B, h *harness, victim *member, whole bool, unit string, conns int, warm int64, request func(i int) (int, error)) {
	quietMean, quietP99 := victimHeartbeats(b, h, victim, false)
	answered, refused, stop := spin(conns, warm, request)
	from, start := answered.Load(), time.Now()
	mean, p99 := victimHeartbeats(b, h, victim, whole)
	attackRate := float64(answered.Load()-from) / time.Since(start).Seconds()
	stop()
	b.ReportMetric(float64(quietMean.Microseconds())/1000, "quiet-ms")
	b.ReportMetric(float64(quietP99.Microseconds())/1000, "quiet-p99-ms")
	b.ReportMetric(float64(mean.Microseconds())/1000, "beside-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "beside-p99-ms")
	b.ReportMetric(float64(mean)/float64(quietMean), "x-quiet")
	b.ReportMetric(attackRate, unit)
	b.ReportMetric(float64(refused.Load()), "attacker-refused")
}

// victimHeartbeats sends B's heartbeats (wait_ms 0) one after another:
// 400 of them or as many as 3 s hold (at least 20), so that a benchmark
// stays short (CI runs every benchmark once) — or with whole for the
// whole 3 s. It returns their mean and p99.
func victimHeartbeats(b *testing.B, h *harness, victim *member, whole bool) (mean, p99 time.Duration) {
	const samples, window = 400, 3 * time.Second
	lat := make([]time.Duration, 0, samples)
	for end := time.Now().Add(window); (whole || len(lat) < samples) && (len(lat) < 20 || time.Now().Before(end)); {
		start := time.Now()
		status, body, _, err := h.try("POST", "/v1/groups/v/heartbeat", victim.token, `{"wait_ms":0}`)
		if err != nil || status != 200 {
			b.Fatalf("victim heartbeat: %v %d %s", err, status, body)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	return sum / time.Duration(len(lat)), lat[len(lat)*99/100]
}

// spin runs request (given its connection's index) over and over on
// conns goroutines, counting 200s as answered and anything else refused,
// until stop; it returns once warm answers are in.
func spin(conns int, warm int64, request func(i int) (int, error)) (answered, refused *atomic.Int64, stop func()) {
	answered, refused = &atomic.Int64{}, &atomic.Int64{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if status, err := request(i); err == nil && status == 200 {
					answered.Add(1)
				} else {
					refused.Add(1)
				}
			}
		})
	}
	for answered.Load() < warm {
		time.Sleep(time.Millisecond) // a benchmark's warm-up, not a test's wait
	}
	return answered, refused, func() { close(done); wg.Wait() }
}
