package coordinator

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capgate/capgate/coordinator/group"
)

// groupLagCollector exports capgate_coordinator_group_lag{group}: per
// group, the sum over its partitions of the latest offset in Kafka minus
// the committed offset, or minus the log start for a partition nothing
// was committed for (what a new consumer would read). Its cardinality is
// bounded: at most group_lag_labels_max groups carry a label, those of
// the largest lag; capgate_coordinator_group_lag_rest is the others' sum.
// By default (0) no group is named: /metrics answers without a token, and
// a group's name and lag are its tenant's, which the API refuses to
// anyone but the group's members and admins (403); the operator opts in
// for a /metrics only Prometheus reaches.
// One scrape looks up at most describe_lag_max partitions in Kafka
// (through the resolver's cache, each within broker_timeout);
// capgate_coordinator_group_lag_unmeasured counts the partitions left
// out. A result is reused for lagReuse, so several scrapers cost one round.
type groupLagCollector struct {
	c *Coordinator

	mu   sync.Mutex
	at   time.Time
	last lagResult
}

const lagReuse = 5 * time.Second

var (
	groupLagDesc = prometheus.NewDesc("capgate_coordinator_group_lag",
		"Records behind the log end, per group (largest group_lag_labels_max groups).", []string{"group"}, nil)
	groupLagRestDesc = prometheus.NewDesc("capgate_coordinator_group_lag_rest",
		"Records behind the log end of the groups without a label of their own.", nil, nil)
	groupLagUnmeasuredDesc = prometheus.NewDesc("capgate_coordinator_group_lag_unmeasured",
		"Partitions whose lag was not looked up (beyond describe_lag_max, or Kafka did not answer).", nil, nil)
)

func newGroupLagCollector(c *Coordinator) *groupLagCollector { return &groupLagCollector{c: c} }

func (l *groupLagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- groupLagDesc
	ch <- groupLagRestDesc
	ch <- groupLagUnmeasuredDesc
}

func (l *groupLagCollector) Collect(ch chan<- prometheus.Metric) {
	l.mu.Lock()
	if time.Since(l.at) >= lagReuse {
		if r, ok := l.measure(); ok {
			l.at, l.last = time.Now(), r
		}
	}
	r := l.last
	l.mu.Unlock()
	for _, g := range r.top {
		ch <- prometheus.MustNewConstMetric(groupLagDesc, prometheus.GaugeValue, float64(g.lag), g.group)
	}
	ch <- prometheus.MustNewConstMetric(groupLagRestDesc, prometheus.GaugeValue, float64(r.rest))
	ch <- prometheus.MustNewConstMetric(groupLagUnmeasuredDesc, prometheus.GaugeValue, float64(r.unmeasured))
}

// lagPartition is one partition of a group with its committed offset
// (-1: none).
type lagPartition struct {
	group     string
	at        topicPartition
	committed int64
}

// logEnds are a partition's earliest and latest offsets.
type logEnds struct{ earliest, latest int64 }

type groupLag struct {
	group string
	lag   int64
}

type lagResult struct {
	top        []groupLag
	rest       int64
	unmeasured int
}

// measure reads every group's partitions from the state machine, looks
// up at most describe_lag_max of their log ends and sums.
func (l *groupLagCollector) measure() (lagResult, bool) {
	var parts []lagPartition
	err := l.c.query(func(m *group.Machine) {
		for _, name := range m.Groups() {
			d, _ := m.DescribeGroup(name)
			for _, p := range d.Partitions {
				parts = append(parts, lagPartition{name, topicPartition{p.Topic, p.Partition}, p.Committed})
			}
		}
	})
	if err != nil {
		return lagResult{}, false
	}
	return groupLags(parts, l.lookup(parts), l.c.cfg.GroupLagLabelsMax), true
}

// lookup asks Kafka (through the resolver's cache) for the log ends of
// the first describe_lag_max distinct partitions of parts.
func (l *groupLagCollector) lookup(parts []lagPartition) map[topicPartition]logEnds {
	var wanted []topicPartition
	seen := map[topicPartition]bool{}
	for _, p := range parts {
		if !seen[p.at] && len(wanted) < l.c.cfg.DescribeLagMax {
			seen[p.at] = true
			wanted = append(wanted, p.at)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.c.cfg.BrokerTimeout)
	defer cancel()
	var mu sync.Mutex
	ends := make(map[topicPartition]logEnds, len(wanted))
	inParallel(len(wanted), func(i int) {
		tp := wanted[i]
		if earliest, latest, err := l.c.offsets.lookup(ctx, tp.topic, tp.partition); err == nil {
			mu.Lock()
			ends[tp] = logEnds{earliest, latest}
			mu.Unlock()
		}
	})
	return ends
}

// groupLags sums each group's lag over the partitions whose log ends are
// known (latest − committed, or latest − earliest when nothing was
// committed; never below 0), keeps the labels largest (ties by name) and
// sums the others into rest. No IO.
func groupLags(parts []lagPartition, ends map[topicPartition]logEnds, labels int) lagResult {
	var r lagResult
	byGroup := map[string]int64{}
	for _, p := range parts {
		e, ok := ends[p.at]
		if !ok {
			r.unmeasured++
			continue
		}
		from := p.committed
		if from < 0 {
			from = e.earliest
		}
		byGroup[p.group] += max(e.latest-from, 0)
	}
	all := make([]groupLag, 0, len(byGroup))
	for g, lag := range byGroup {
		all = append(all, groupLag{g, lag})
	}
	slices.SortFunc(all, func(a, b groupLag) int {
		return cmp.Or(cmp.Compare(b.lag, a.lag), cmp.Compare(a.group, b.group))
	})
	r.top = all[:min(labels, len(all))]
	for _, g := range all[len(r.top):] {
		r.rest += g.lag
	}
	return r
}
