package coordinator_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// BenchmarkJoinStable measures join → group stable at the protocol level
// with state: badger and state: kafka in the same run, interleaved: three
// members hold 12 partitions, a gateway acknowledges every sync, a fourth
// member joins; stable is when the newcomer holds the 3 partitions that
// move to it (the old holders were told, committed and released, the
// gateway acked the fences, the coordinator granted). Every Ready on the
// way is one synchronous Update: a badger transaction synced to disk, or
// one Kafka transaction on kfake (3 round trips: AddPartitionsToTxn,
// Produce, EndTxn). Members are HTTP clients driven by the test, not SDK
// consumers: no fetching, so this is the coordinator's share of DESIGN
// §12's join → stable (≤ 50 ms with the replicated state).
func BenchmarkJoinStable(b *testing.B) {
	var badger, kafka []time.Duration
	for range b.N {
		badger = append(badger, joinStable(b, false))
		kafka = append(kafka, joinStable(b, true))
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p50 := func(d []time.Duration) float64 { return ms(percentile(d, 50)) }
	worst := func(d []time.Duration) float64 { return ms(percentile(d, 100)) }
	b.ReportMetric(p50(badger), "badger-p50-ms")
	b.ReportMetric(worst(badger), "badger-max-ms")
	b.ReportMetric(p50(kafka), "kafka-p50-ms")
	b.ReportMetric(worst(kafka), "kafka-max-ms")
	b.ReportMetric(p50(kafka)/p50(badger), "kafka/badger-p50")
}

// joinStable runs one 3 → 4 join on a fresh coordinator and returns the
// time from the join request until the newcomer holds its partitions.
func joinStable(b *testing.B, kafka bool) time.Duration {
	b.StopTimer()
	e := newEnv(b, map[string]int32{"orders": 12})
	e.log = nopLogger()
	if kafka {
		useKafkaState(b, e)
	}
	h := e.start(b)
	gw := newGateway(h, "gw1")
	gw.run(1000)
	creds := h.clientCredential(b, []string{"g"}, []string{"orders"})
	stop := make(chan struct{})
	var loops sync.WaitGroup
	for i := range 3 {
		m := h.join(b, "g", creds, api.JoinRequest{ClientID: fmt.Sprint("m", i), Topics: []string{"orders"}})
		loops.Go(func() { releaseLoop(m, stop) })
	}
	eventually(b, func() string { return settled(b, h, 3) })

	b.StartTimer()
	start := time.Now()
	newcomer := h.join(b, "g", creds, api.JoinRequest{ClientID: "newcomer", Topics: []string{"orders"}})
	for held(newcomer) < 3 {
		if _, err := newcomer.tryHeartbeat(1000); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()

	close(stop)
	gw.halt()
	h.stop(b)
	loops.Wait()
	b.StartTimer()
	return elapsed
}

// settled says why the group is not yet 12 partitions owned by members
// members, none revoking ("" when it is).
func settled(b *testing.B, h *harness, members int) string {
	d := h.describe(b, "g")
	owners := map[string]int{}
	for _, p := range d.Partitions {
		if p.State != "owned" {
			return fmt.Sprintf("partition %d %s", p.Partition, p.State)
		}
		owners[p.Owner]++
	}
	if len(owners) != members {
		return fmt.Sprintf("%d owners", len(owners))
	}
	return ""
}

// held counts the partitions a member holds a grant for.
func held(m *member) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.grants)
}
