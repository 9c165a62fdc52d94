package coordinator_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// BenchmarkTakeover: three replicas on a 3-broker kfake hold a group of
// 20 members over 1,000 partitions; each round stops the leader and
// measures until another replica serves (every other one naming it) —
// the lease (1 s) and the stagger included — and how much of it was the
// promotion itself (fence, read to the end, restore: the new leader's
// takeover metric), and, as the same-run
// baseline, a cold start of a lone coordinator on the same log (open:
// fence, replay the log from the last snapshot, restore, serve) with no
// warm follower.
//
//	go test ./coordinator -run '^$' -bench Takeover -benchtime 5x
func BenchmarkTakeover(b *testing.B) {
	e := newEnvBrokers(b, map[string]int32{"orders": 1000}, 3)
	useKafkaState(b, e)
	s := startReplicas(b, e, 3)
	lead := s.awaitLeader(b)
	h := s.harness(lead)
	creds := h.clientCredential(b, []string{"g"}, []string{"orders"})
	for i := range 20 {
		h.join(b, "g", creds, api.JoinRequest{ClientID: fmt.Sprint("m", i), Topics: []string{"orders"}, SessionTimeoutMs: 60000})
	}
	promoted := func(i int) float64 { // seconds this replica spent taking over, in all
		return s.harness(i).metric(b, "capgate_coordinator_replica_takeover_seconds_sum")
	}
	var takeover, cold, promote time.Duration
	for b.Loop() {
		before := map[int]float64{}
		for i := range s.replicas {
			if i != lead {
				before[i] = max(promoted(i), 0)
			}
		}
		start := time.Now()
		s.stop(b, lead)
		next := s.awaitLeader(b)
		takeover += time.Since(start)
		promote += time.Duration((promoted(next) - before[next]) * float64(time.Second))
		s.start(b, lead)
		s.awaitLeader(b)
		lead = next
	}
	// The baseline: every replica stopped, one lone coordinator opens the
	// same log cold.
	for i := range s.replicas {
		s.stop(b, i)
	}
	for range b.N {
		start := time.Now()
		c := e.start(b)
		c.describe(b, "g")
		cold += time.Since(start)
		c.stop(b)
	}
	n := float64(b.N)
	b.ReportMetric(float64(takeover.Milliseconds())/n, "takeover-ms")
	b.ReportMetric(float64(cold.Milliseconds())/n, "cold-open-ms")
	b.ReportMetric(float64(promote.Milliseconds())/n, "promote-ms")
}
