package bench

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/internal/timeline"
)

// protocol is one way for a group to rebalance: capgate (SDK through a
// gateway) or one of Kafka's own protocols (franz-go group consumers).
type protocol struct {
	Name string
	// Kafka is nil for capgate.
	Kafka *kafkaProtocol
	// BrokerConfigs are kfake broker configs (the KIP-848 heartbeat).
	BrokerConfigs map[string]string
}

// protocols returns the protocols compared, capgate last. kgoHeartbeat is
// the classic protocols' heartbeat interval (0: kgo's default, 3s).
func protocols(kgoHeartbeat time.Duration) []protocol {
	kip848 := func(name string, heartbeat time.Duration) protocol {
		return protocol{
			Name:          name,
			Kafka:         &kafkaProtocol{Balancer: kgo.CooperativeStickyBalancer, ServerSide: true},
			BrokerConfigs: map[string]string{"group.consumer.heartbeat.interval.ms": strconv.FormatInt(heartbeat.Milliseconds(), 10)},
		}
	}
	return []protocol{
		{Name: "eager-range", Kafka: &kafkaProtocol{Balancer: kgo.RangeBalancer, Heartbeat: kgoHeartbeat}},
		{Name: "cooperative-sticky", Kafka: &kafkaProtocol{Balancer: kgo.CooperativeStickyBalancer, Heartbeat: kgoHeartbeat}},
		kip848("kip848-hb5s", 5*time.Second),
		kip848("kip848-hb500ms", 500*time.Millisecond),
		{Name: "capgate"},
	}
}

// rebalanceParams describe one run: Members consumers settle on a topic of
// Partitions, the baseline runs, one more member joins, and the run ends
// once the group has settled again for Quiet.
type rebalanceParams struct {
	Protocol   protocol
	Partitions int32
	Members    int
	// Interval: one record per partition this often.
	Interval time.Duration
	Baseline time.Duration
	// Quiet is how long nothing may move before the group counts as
	// settled (it must exceed a slow member's longest poll).
	Quiet time.Duration
	// Settle extends the join window beyond the moment the group was
	// stable again.
	Settle time.Duration
	// Timeout bounds each wait for the group to settle.
	Timeout time.Duration
	// Slow, when set, slows the first member down.
	Slow slowness
}

// rebalanceRun is a result with its timing context.
type rebalanceRun struct {
	Params rebalanceParams
	timeline.Analysis
	Timeline        timeline.Timeline
	Window          timeline.Window
	ProduceFailures int
}

// runRebalance runs one scenario on its own kfake cluster (and, for
// capgate, its own coordinator and gateway).
func runRebalance(tb testing.TB, p rebalanceParams) rebalanceRun {
	tb.Helper()
	runID := randomID()
	const topic = "rebalance"
	opts := deploymentOptions{Topics: map[string]int32{topic: p.Partitions}, KafkaOnly: p.Protocol.Kafka != nil, Gateways: 1}
	if p.Protocol.BrokerConfigs != nil {
		opts.Kafka = append(opts.Kafka, kfake.BrokerConfigs(p.Protocol.BrokerConfigs))
	}
	s := startDeployment(tb, opts)
	defer s.close(tb)
	tr := newTracker(runID)
	prod := tr.startProducer(s, topic, p.Partitions, p.Interval)
	defer prod.Stop()
	r := &rebalanceRunner{s: s, p: p, tr: tr, topic: topic, group: "bench-" + runID}
	if p.Protocol.Kafka == nil {
		r.credential = s.credential(tb, r.group)
	}
	defer r.stopAll(tb)
	w, err := r.phases()
	if err != nil {
		tb.Fatalf("%s: %v", p.Protocol.Name, err)
	}
	prod.Stop()
	r.waitDrained()
	tl := tr.Timeline(p.Partitions)
	w.Settle = p.Settle
	if p.Slow.Max > 0 {
		w.Slow, w.SlowMax = memberName(1), p.Slow.Max
	}
	failures, _ := prod.Failures()
	return rebalanceRun{Params: p, Analysis: timeline.Analyze(tl, w), Timeline: tl, Window: w, ProduceFailures: failures}
}

func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func memberName(i int) string { return "m" + strconv.Itoa(i) }

type rebalanceRunner struct {
	s          *deployment
	p          rebalanceParams
	tr         *tracker
	topic      string
	group      string
	credential string

	names   []string
	members []member
}

// phases starts the first members, waits until they settled, runs the
// baseline, adds the newcomer and waits until the group settled again,
// and returns the phase boundaries.
func (r *rebalanceRunner) phases() (timeline.Window, error) {
	var tl timeline.Window
	for i := 1; i <= r.p.Members; i++ {
		if err := r.add(i); err != nil {
			return tl, err
		}
	}
	steady, ok := r.waitSettled()
	if !ok {
		return tl, fmt.Errorf("first %d members not settled within %s", r.p.Members, r.p.Timeout)
	}
	tl.SteadyFrom = steady
	time.Sleep(r.p.Baseline) // the baseline is wall-clock by design
	tl.JoinAt = time.Now()
	tl.Newcomer = memberName(r.p.Members + 1)
	if err := r.add(r.p.Members + 1); err != nil {
		return tl, err
	}
	tl.End, _ = r.waitSettled() // not settled: Analyze reports it
	return tl, nil
}

func (r *rebalanceRunner) add(i int) error {
	spec := memberSpec{Name: memberName(i), Group: r.group, Topic: r.topic, Tracker: r.tr}
	if i == 1 {
		spec.Slow = r.p.Slow
	}
	var m member
	var err error
	if r.p.Protocol.Kafka != nil {
		m, err = startKafkaMember(r.s, spec, *r.p.Protocol.Kafka)
	} else {
		m, err = startCapgateMember(r.s, spec, r.credential)
	}
	if err != nil {
		return err
	}
	r.names = append(r.names, spec.Name)
	r.members = append(r.members, m)
	return nil
}

// waitSettled polls the tracker until the current members settled (see
// timeline.Recorder.Settled) or Timeout passed; it returns when.
func (r *rebalanceRunner) waitSettled() (time.Time, bool) {
	deadline := time.Now().Add(r.p.Timeout)
	for {
		now := time.Now()
		if r.tr.Settled(r.p.Partitions, r.names, now.Add(-r.p.Quiet), now) {
			return now, true
		}
		if now.After(deadline) {
			return now, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitDrained waits (bounded) until every acknowledged record arrived.
func (r *rebalanceRunner) waitDrained() {
	deadline := time.Now().Add(r.p.Timeout)
	for !r.tr.Drained() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

// stopAll closes every member at once.
func (r *rebalanceRunner) stopAll(tb testing.TB) {
	var wg sync.WaitGroup
	errs := make([]error, len(r.members))
	for i, m := range r.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.stop()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Logf("%s: closing members: %v", r.p.Protocol.Name, err)
	}
}
