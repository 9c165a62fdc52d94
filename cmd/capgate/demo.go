package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/tlsconf"
)

// demoConfig is what `capgate dev --demo` runs against.
type demoConfig struct {
	CoordinatorURL string
	GatewayURL     string
	Brokers        []string
	Credential     string
	Topic          string
	Partitions     int32
	Group          string
	Duration       time.Duration
	Tolerance      time.Duration
	Log            *zap.Logger
	TLS            tlsconf.ClientConfig
}

const (
	demoInterval  = 10 * time.Millisecond // one record per partition this often
	demoConsumers = 3                     // then a 4th joins
	demoDrain     = 1500 * time.Millisecond
	demoSettle    = 500 * time.Millisecond // join window beyond the last move
)

// runDemo produces to every partition, starts 3 consumers, waits until
// they are steady, measures the steady state, adds a 4th consumer, keeps
// going until shortly before Duration, drains, leaves, and prints the
// summary. It returns an error when the summary does not hold.
func runDemo(ctx context.Context, out io.Writer, cfg demoConfig) error {
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	runID := make([]byte, 4)
	rand.Read(runID)
	runID = []byte(hex.EncodeToString(runID))
	tr := newTracker(runID, start, out)
	fmt.Fprintf(out, "demo: 1 record per partition every %s to %q (key %s); consumers c1..c%d join group %q, then c%d\n\n",
		demoInterval, cfg.Topic, runID, demoConsumers, cfg.Group, demoConsumers+1)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	prod, err := startDemoProducer(ctx, cfg, runID, tr)
	if err != nil {
		return err
	}
	defer prod.stop()
	var consumers []*demoConsumer
	closeAll := sync.OnceFunc(func() { closeDemoConsumers(out, consumers) })
	defer closeAll()
	for i := 1; i <= demoConsumers; i++ {
		c, err := startDemoConsumer(ctx, cfg, fmt.Sprintf("c%d", i), tr)
		if err != nil {
			return err
		}
		consumers = append(consumers, c)
	}
	phases, err := demoPhases(ctx, cfg, tr, consumers, start, deadline)
	if err != nil {
		return err
	}
	c, err := startDemoConsumer(ctx, cfg, fmt.Sprintf("c%d", demoConsumers+1), tr)
	if err != nil {
		return err
	}
	consumers = append(consumers, c)
	return finishDemo(ctx, out, cfg, tr, prod, consumers, closeAll, phases, deadline)
}

// demoTimes are the phase boundaries: the baseline runs from steadyAt to
// joinAt; production stops at stopAt.
type demoTimes struct {
	steadyAt, joinAt, stopAt time.Time
}

// demoPhases waits until the first consumers are steady, lets the
// baseline run, and returns at the newcomer's join time (already marked).
func demoPhases(ctx context.Context, cfg demoConfig, tr *tracker, consumers []*demoConsumer, start, deadline time.Time) (demoTimes, error) {
	ph := demoTimes{stopAt: deadline.Add(-demoDrain)}
	steadyBy := start.Add(cfg.Duration / 2)
	steadyAt, err := waitSteady(ctx, cfg.Partitions, tr, consumers, steadyBy)
	if err != nil {
		return ph, err
	}
	ph.steadyAt = steadyAt
	tr.event(steadyAt, "steady: %s", assignment(consumers))
	baseline := max(time.Second, cfg.Duration/6)
	ph.joinAt = later(steadyAt.Add(baseline), start.Add(cfg.Duration/3))
	if ph.joinAt.Add(2 * demoSettle).After(ph.stopAt) {
		return ph, fmt.Errorf("demo: steady only at %s, too late for a join window before %s; raise --demo-duration", tr.since(steadyAt), tr.since(ph.stopAt))
	}
	if err := sleepUntil(ctx, ph.joinAt); err != nil {
		return ph, err
	}
	ph.joinAt = time.Now()
	tr.markJoin(ph.joinAt)
	tr.event(ph.joinAt, "c%d joins group %s", len(consumers)+1, cfg.Group)
	return ph, nil
}

// finishDemo runs the join window, stops producing, drains, and judges.
func finishDemo(ctx context.Context, out io.Writer, cfg demoConfig, tr *tracker, prod *demoProducer, consumers []*demoConsumer, closeAll func(), ph demoTimes, deadline time.Time) error {
	if err := sleepUntil(ctx, ph.stopAt); err != nil {
		return err
	}
	prod.stop()
	tr.event(time.Now(), "settled: %s", assignment(consumers))
	for !tr.drained() && time.Now().Before(deadline.Add(demoDrain)) {
		if err := sleepUntil(ctx, time.Now().Add(20*time.Millisecond)); err != nil {
			return err
		}
	}
	closeAll()
	in := tr.input()
	in.SteadyAt, in.Partitions, in.Tolerance = ph.steadyAt, cfg.Partitions, cfg.Tolerance
	in.ExpectedMoves = int(cfg.Partitions) / (demoConsumers + 1)
	in.WindowEnd = ph.stopAt
	if end := later(tr.lastMoveAt(), ph.joinAt).Add(demoSettle); end.Before(in.WindowEnd) {
		in.WindowEnd = end
	}
	s := summarize(in)
	if prod.failed() > 0 {
		fmt.Fprintf(out, "note: %d produce requests failed (not counted as produced)\n", prod.failed())
	}
	s.print(out, cfg.Topic)
	if !s.ok() {
		return errors.New("demo: the summary does not hold: " + strings.Join(s.Failures, "; "))
	}
	return nil
}

// waitSteady returns once the consumers together hold every partition,
// evenly, every partition received records in the last 300 ms and nothing
// moved in that time.
func waitSteady(ctx context.Context, partitions int32, tr *tracker, consumers []*demoConsumer, by time.Time) (time.Time, error) {
	const quiet = 300 * time.Millisecond
	for {
		now := time.Now()
		if balanced(partitions, consumers) && tr.steady(partitions, now.Add(-quiet)) {
			return now, nil
		}
		if now.After(by) {
			return now, fmt.Errorf("demo: consumers not steady by %s: %s", tr.since(by), assignment(consumers))
		}
		if err := sleepUntil(ctx, now.Add(20*time.Millisecond)); err != nil {
			return now, err
		}
	}
}

// balanced reports whether the consumers hold every partition once, their
// counts at most one apart.
func balanced(partitions int32, consumers []*demoConsumer) bool {
	held := map[int32]int{}
	lo, hi := int(partitions), 0
	for _, c := range consumers {
		ps := c.consumer.Assigned()
		lo, hi = min(lo, len(ps)), max(hi, len(ps))
		for _, p := range ps {
			held[p.Partition]++
		}
	}
	if len(held) != int(partitions) || hi-lo > 1 {
		return false
	}
	for _, n := range held {
		if n != 1 {
			return false
		}
	}
	return true
}

// assignment is "c1=[0 1 2 3] c2=[...]".
func assignment(consumers []*demoConsumer) string {
	parts := make([]string, len(consumers))
	for i, c := range consumers {
		var ids []int
		for _, p := range c.consumer.Assigned() {
			ids = append(ids, int(p.Partition))
		}
		sort.Ints(ids)
		parts[i] = fmt.Sprintf("%s=%v", c.name, ids)
	}
	return strings.Join(parts, " ")
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// sleepUntil waits for t or ctx; the demo's phases are wall-clock.
func sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("demo: interrupted before the summary: %w", ctx.Err())
	case <-timer.C:
		return nil
	}
}

// demoProducer writes one record per partition every demoInterval
// straight to the broker, each stamped with its send time.
type demoProducer struct {
	client   *broker.Client
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	failures int
	once     sync.Once
}

func startDemoProducer(ctx context.Context, cfg demoConfig, runID []byte, tr *tracker) (*demoProducer, error) {
	bc := broker.DefaultConfig()
	bc.Seeds = cfg.Brokers
	cl, err := broker.New(bc, cfg.Log.Named("demo-producer"))
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &demoProducer{client: cl, cancel: cancel}
	for partition := range cfg.Partitions {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.run(ctx, cfg.Topic, partition, runID, tr)
		}()
	}
	return p, nil
}

func (p *demoProducer) run(ctx context.Context, topic string, partition int32, runID []byte, tr *tracker) {
	tick := time.NewTicker(demoInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			rec := &kgo.Record{Key: runID, Value: strconv.AppendInt(nil, now.UnixNano(), 10), Timestamp: now}
			offset, err := p.client.Produce(ctx, topic, partition, []*kgo.Record{rec})
			if err != nil {
				if ctx.Err() == nil {
					p.mu.Lock()
					p.failures++
					p.mu.Unlock()
				}
				continue
			}
			tr.produced(partition, offset)
		}
	}
}

func (p *demoProducer) failed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failures
}

// stop ends production and waits for the requests in flight.
func (p *demoProducer) stop() {
	p.once.Do(func() {
		p.cancel()
		p.wg.Wait()
		p.client.Close()
	})
}

// demoConsumer is one SDK consumer with its poll loop.
type demoConsumer struct {
	name     string
	consumer *client.Consumer
	cancel   context.CancelFunc
	quiet    func() // see quietableLogger
	done     chan struct{}
}

func startDemoConsumer(ctx context.Context, cfg demoConfig, name string, tr *tracker) (*demoConsumer, error) {
	cc := client.DefaultConfig()
	cc.CoordinatorURL, cc.Gateways = cfg.CoordinatorURL, []string{cfg.GatewayURL}
	cc.Group, cc.Topics, cc.Credential = cfg.Group, []string{cfg.Topic}, cfg.Credential
	cc.ClientID = "demo-" + name
	cc.TLS = cfg.TLS
	log, quiet := quietableLogger(cfg.Log.Named(name))
	c, err := client.NewConsumer(cc, client.WithLogger(log),
		client.OnGrant(func(ps []client.Partition) { tr.granted(ps, time.Now()) }))
	if err != nil {
		return nil, fmt.Errorf("demo: %s: %w", name, err)
	}
	if err := c.Join(ctx); err != nil {
		c.Close(context.Background())
		return nil, fmt.Errorf("demo: %s: join: %w", name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	d := &demoConsumer{name: name, consumer: c, cancel: cancel, quiet: quiet, done: make(chan struct{})}
	go d.loop(ctx, tr, cfg.Log)
	return d, nil
}

// loop polls, hands the records to the tracker, and commits every second.
func (d *demoConsumer) loop(ctx context.Context, tr *tracker, log *zap.Logger) {
	defer close(d.done)
	lastCommit := time.Now()
	for {
		records, err := d.consumer.Poll(ctx)
		if err != nil {
			if ctx.Err() == nil {
				log.Error("demo consumer stopped", zap.String("consumer", d.name), zap.Error(err))
			}
			return
		}
		now := time.Now()
		tr.observe(d.name, records, now)
		if now.Sub(lastCommit) >= time.Second {
			if err := d.consumer.Commit(ctx); err != nil && ctx.Err() == nil {
				log.Warn("demo commit", zap.String("consumer", d.name), zap.Error(err))
			}
			lastCommit = now
		}
	}
}

// closeDemoConsumers stops the poll loops, then closes every consumer at
// once (final commit, release, leave).
func closeDemoConsumers(out io.Writer, consumers []*demoConsumer) {
	var wg sync.WaitGroup
	for _, d := range consumers {
		d.cancel()
		<-d.done
		d.quiet()
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := d.consumer.Close(ctx); err != nil {
				fmt.Fprintf(out, "warning: %s did not leave cleanly: %v\n", d.name, err)
			}
		}()
	}
	wg.Wait()
}
