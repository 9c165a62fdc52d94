package coordinator_test

import (
	"slices"
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
	const members, conns, samples, window = 100, 200, 400, 3 * time.Second
	e := newBenchEnv(b, map[string]int32{"orders": 10})
	e.cfg.TenantLoopShare, e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = share, rate, burst
	h := e.start(b)
	attackers := joinMany(b, h, h.clientCredential(b, []string{"g"}, []string{"orders"}), "orders", members, 16)
	victim := h.join(b, "v", h.clientCredential(b, []string{"v"}, []string{"orders"}), api.JoinRequest{Topics: []string{"orders"}})
	victim.heartbeat(b, 0)
	// B's heartbeats one after another: samples of them, or as many as
	// window holds (at least 20), so that the benchmark stays short
	// (CI runs every benchmark once).
	measure := func() (mean, p99 time.Duration) {
		lat := make([]time.Duration, 0, samples)
		for end := time.Now().Add(window); len(lat) < samples && (len(lat) < 20 || time.Now().Before(end)); {
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
	quietMean, quietP99 := measure()

	stop := make(chan struct{})
	var answered, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := attackers[i%members]
			for {
				select {
				case <-stop:
					return
				default:
				}
				status, _, _, err := h.try("POST", "/v1/groups/g/heartbeat", m.token, `{"wait_ms":0}`)
				if err == nil && status == 200 {
					answered.Add(1)
				} else {
					refused.Add(1)
				}
			}
		}()
	}
	for answered.Load() < 2*conns { // every connection up and spinning
		time.Sleep(time.Millisecond) // a benchmark's warm-up, not a test's wait
	}
	from, start := answered.Load(), time.Now()
	mean, p99 := measure()
	attackRate := float64(answered.Load()-from) / time.Since(start).Seconds()
	close(stop)
	wg.Wait()
	b.ReportMetric(float64(quietMean.Microseconds())/1000, "quiet-ms")
	b.ReportMetric(float64(quietP99.Microseconds())/1000, "quiet-p99-ms")
	b.ReportMetric(float64(mean.Microseconds())/1000, "beside-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "beside-p99-ms")
	b.ReportMetric(float64(mean)/float64(quietMean), "x-quiet")
	b.ReportMetric(attackRate, "attacker-hb/s")
	b.ReportMetric(float64(refused.Load()), "attacker-refused")
}
