package coordinator

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/capgate/capgate/coordinator/leader"
)

// replicaMetrics are a replica's own metrics, on a registry of their own:
// a standby serves them alone, a leader beside its Coordinator's.
type replicaMetrics struct {
	registry  *prometheus.Registry
	leading   prometheus.Gauge
	takeovers prometheus.Counter
	stepdowns prometheus.Counter
	fenced    prometheus.Counter
	takeover  prometheus.Histogram
	seen      leader.Stats // counted so far (count)
}

func newReplicaMetrics() *replicaMetrics {
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
	}
	m.registry.MustRegister(m.leading, m.takeovers, m.stepdowns, m.fenced, m.takeover)
	return m
}

// count brings the counters to the decisions' counts.
func (m *replicaMetrics) count(s leader.Stats) {
	m.takeovers.Add(float64(s.Takeovers - m.seen.Takeovers))
	m.stepdowns.Add(float64(s.StepDowns - m.seen.StepDowns))
	m.fenced.Add(float64(s.FencedWrites - m.seen.FencedWrites))
	m.seen = s
}

func (m *replicaMetrics) setRole(role leader.Role) {
	if role == leader.Leader {
		m.leading.Set(1)
	} else {
		m.leading.Set(0)
	}
}
