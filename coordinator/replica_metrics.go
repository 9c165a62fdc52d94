package coordinator

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/capgate/capgate/coordinator/leader"
	"github.com/capgate/capgate/tlsconf"
)

// replicaMetrics are a replica's own metrics and its process's (Go
// runtime, process, build info, TLS expiry: processCollectors), on a
// registry of their own: a standby serves them alone, a leader beside its
// Coordinator's, which leaves the process's out (options.embedded).
type replicaMetrics struct {
	registry  *prometheus.Registry
	leading   prometheus.Gauge
	takeovers prometheus.Counter
	stepdowns prometheus.Counter
	fenced    prometheus.Counter
	takeover  prometheus.Histogram
	attempts  prometheus.Counter
	unfit     prometheus.Gauge
	seen      leader.Stats // counted so far (count)
}

func newReplicaMetrics(tls *tlsconf.Server) *replicaMetrics {
	m := &replicaMetrics{
		registry: prometheus.NewRegistry(),
		leading: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capgate_coordinator_replica_leader", Help: "1 while this replica leads its shard, else 0.",
		}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capgate_coordinator_replica_takeovers_total", Help: "Times this replica took the shard over.",
		}),
		stepdowns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capgate_coordinator_replica_stepdowns_total", Help: "Times this replica stopped leading (fenced, failed write, lost lease).",
		}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capgate_coordinator_replica_fenced_writes_total", Help: "Writes of this replica's leadership (a beat, a Ready's persist) the log refused fenced: a newer leader had taken the shard over.",
		}),
		takeover: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "capgate_coordinator_replica_takeover_seconds", Help: "From deciding to take over to serving: fence, read to the end, restore.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}),
		attempts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capgate_coordinator_replica_takeover_attempts_total", Help: "Takeovers this replica began (fence, read to the end, restore), failed ones included.",
		}),
		unfit: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capgate_coordinator_replica_unfit", Help: "1 once this replica found it can never take the state log over (another coordinator id, cluster, KEK or transactional id prefix than the log's): it is no standby and never tries; else 0.",
		}),
	}
	m.registry.MustRegister(m.leading, m.takeovers, m.stepdowns, m.fenced, m.takeover, m.attempts, m.unfit)
	m.registry.MustRegister(processCollectors(tls)...)
	return m
}

// count brings the counters to the decisions' counts.
func (m *replicaMetrics) count(s leader.Stats) {
	m.takeovers.Add(float64(s.Takeovers - m.seen.Takeovers))
	m.stepdowns.Add(float64(s.StepDowns - m.seen.StepDowns))
	m.fenced.Add(float64(s.FencedWrites - m.seen.FencedWrites))
	m.attempts.Add(float64(s.Promotions - m.seen.Promotions))
	m.seen = s
}

func (m *replicaMetrics) setRole(role leader.Role) {
	if role == leader.Leader {
		m.leading.Set(1)
	} else {
		m.leading.Set(0)
	}
}
