package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/internal/stack"
	"github.com/capgate/capgate/internal/timeline"
	"github.com/capgate/capgate/tlsconf"
)

// demoConfig is what `capgate dev --demo` runs against.
type demoConfig struct {
	Stack      *stack.Stack
	Credential string
	Topic      string
	Partitions int32
	Group      string
	Duration   time.Duration
	Tolerance  time.Duration
	Log        *zap.Logger
	TLS        tlsconf.ClientConfig
	// KillLeaderAfter stops the leading coordinator replica this long
	// into the demo (0: never; demofailover.go).
	KillLeaderAfter time.Duration
}

const (
	demoInterval  = 10 * time.Millisecond // one record per partition this often
	demoConsumers = 3                     // then a 4th joins
	demoDrain     = 1500 * time.Millisecond
	demoSettle    = 500 * time.Millisecond // join window beyond the moment the group is stable again
	demoQuiet     = 300 * time.Millisecond // steady: nothing moved and every partition flowing this long
)

// runDemo produces to every partition, starts 3 consumers, waits until
// they are steady, lets the baseline run, adds a 4th consumer, keeps
// going until shortly before Duration, drains, leaves, and prints the
// summary (timeline.Analyze: the same pauses as the benchmarks). It
// returns an error when the summary does not hold.
func runDemo(ctx context.Context, out io.Writer, cfg demoConfig) error {
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	runID := make([]byte, 4)
	rand.Read(runID)
	d := &demo{cfg: cfg, out: out, start: start, runID: []byte(hex.EncodeToString(runID)), rec: timeline.NewRecorder(), reads: demoReads{}, owner: map[int32]string{}}
	fmt.Fprintf(out, "demo: 1 record per partition every %s to %q (key %s); consumers c1..c%d join group %q, then c%d\n\n",
		demoInterval, cfg.Topic, d.runID, demoConsumers, cfg.Group, demoConsumers+1)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	prod := cfg.Stack.StartProducer(stack.ProducerOptions{Topic: cfg.Topic, Partitions: cfg.Partitions, Interval: demoInterval,
		Record: stack.Stamped(d.runID), OnAck: func(p int32, offset int64, _ *kgo.Record, _ time.Time) { d.rec.Acked(p, offset) }})
	defer prod.Stop()
	defer d.closeAll()
	for i := 1; i <= demoConsumers; i++ {
		if err := d.addConsumer(ctx); err != nil {
			return err
		}
	}
	if cfg.KillLeaderAfter > 0 {
		failover := make(chan *demoFailover, 1)
		go func() { failover <- d.killLeader(ctx, cfg.KillLeaderAfter) }()
		d.failover = failover
	}
	w, err := d.phases(ctx, deadline)
	if err != nil {
		return err
	}
	if err := d.addConsumer(ctx); err != nil {
		return err
	}
	return d.finish(ctx, prod, w, deadline)
}

// demo is one run: its consumers, what they received (a
// timeline.Recorder), and the live handoff lines.
type demo struct {
	cfg   demoConfig
	out   io.Writer
	start time.Time
	runID []byte // the key of this run's records
	rec   *timeline.Recorder

	failover <-chan *demoFailover // with KillLeaderAfter

	mu        sync.Mutex
	consumers []*demoConsumer
	owner     map[int32]string // who received each partition's last record
	reads     demoReads        // who read each partition under which epoch
	closed    bool
}

// demoConsumer is one SDK consumer (the stack's poll loop) of the demo.
type demoConsumer struct {
	name  string
	c     *stack.Consumer
	quiet func() // see quietableLogger
}

func (d *demo) addConsumer(ctx context.Context) error {
	d.mu.Lock()
	name := fmt.Sprintf("c%d", len(d.consumers)+1)
	d.mu.Unlock()
	cc := d.cfg.Stack.ClientConfig(d.cfg.Group, []string{d.cfg.Topic}, d.cfg.Credential)
	cc.ClientID = "demo-" + name
	cc.TLS = d.cfg.TLS
	log, quiet := quietableLogger(d.cfg.Log.Named(name))
	// The loop commits every second with CommitAsync (the stack's
	// default): a leader being replaced (--kill-leader) never holds it up.
	c, err := stack.StartConsumer(ctx, stack.ConsumerOptions{Config: cc, Logger: log, CommitEvery: time.Second,
		OnRecords: func(_ string, records []client.Record, at time.Time) { d.observe(name, records, at) },
		OnHook: func(h stack.Hook, ps []client.Partition, at time.Time) {
			var ids []int32
			for _, p := range ps {
				ids = append(ids, p.Partition)
			}
			d.rec.Hold(name, ids, h == stack.HookGrant, at)
		}})
	if err != nil {
		return fmt.Errorf("demo: %s: %w", name, err)
	}
	d.mu.Lock()
	d.consumers = append(d.consumers, &demoConsumer{name: name, c: c, quiet: quiet})
	d.mu.Unlock()
	return nil
}

// observe records what consumer received at at (and under which epoch)
// and prints a handoff line when a partition's record reaches another
// consumer than its last one.
func (d *demo) observe(consumer string, records []client.Record, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range records {
		if string(r.Key) != string(d.runID) {
			continue // left over from an earlier run
		}
		if prev := d.owner[r.Partition]; prev != "" && prev != consumer {
			d.printf(at, "%s/%-3d %s -> %s", r.Topic, r.Partition, prev, consumer)
		}
		d.owner[r.Partition] = consumer
		d.rec.Deliver(consumer, r.Partition, r.Offset, at)
		d.reads.add(r.Partition, consumer, r.Epoch, at)
	}
}

// printf writes one timeline line; the caller holds mu.
func (d *demo) printf(at time.Time, format string, args ...any) {
	fmt.Fprintf(d.out, "  %s  %s\n", d.since(at), fmt.Sprintf(format, args...))
}

func (d *demo) event(at time.Time, format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.printf(at, format, args...)
}

// since formats t relative to the demo's start.
func (d *demo) since(at time.Time) string { return fmt.Sprintf("+%6.3fs", at.Sub(d.start).Seconds()) }

func (d *demo) names() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, c := range d.consumers {
		out = append(out, c.name)
	}
	return out
}

// phases waits until the first consumers are steady, lets the baseline
// run, and returns the window at the newcomer's join.
func (d *demo) phases(ctx context.Context, deadline time.Time) (timeline.Window, error) {
	w := timeline.Window{End: deadline.Add(-demoDrain), Settle: demoSettle, Newcomer: fmt.Sprintf("c%d", demoConsumers+1)}
	steadyBy := d.start.Add(d.cfg.Duration / 2)
	for {
		now := time.Now()
		if d.rec.Settled(d.cfg.Partitions, d.names(), now.Add(-demoQuiet), now) {
			w.SteadyFrom = now
			break
		}
		if now.After(steadyBy) {
			return w, fmt.Errorf("demo: consumers not steady by %s: %s", d.since(steadyBy), d.assignment())
		}
		if err := sleepUntil(ctx, now.Add(20*time.Millisecond)); err != nil {
			return w, err
		}
	}
	d.event(w.SteadyFrom, "steady: %s", d.assignment())
	baseline := max(time.Second, d.cfg.Duration/6)
	w.JoinAt = later(w.SteadyFrom.Add(baseline), d.start.Add(d.cfg.Duration/3))
	if w.JoinAt.Add(2 * demoSettle).After(w.End) {
		return w, fmt.Errorf("demo: steady only at %s, too late for a join window before %s; raise --demo-duration", d.since(w.SteadyFrom), d.since(w.End))
	}
	if err := sleepUntil(ctx, w.JoinAt); err != nil {
		return w, err
	}
	w.JoinAt = time.Now()
	d.event(w.JoinAt, "%s joins group %s", w.Newcomer, d.cfg.Group)
	return w, nil
}

// finish runs the join window, stops producing, drains, and judges.
func (d *demo) finish(ctx context.Context, prod *stack.Producer, w timeline.Window, deadline time.Time) error {
	if err := sleepUntil(ctx, w.End); err != nil {
		return err
	}
	prod.Stop()
	d.event(time.Now(), "settled: %s", d.assignment())
	for !d.rec.Drained() && time.Now().Before(deadline.Add(demoDrain)) {
		if err := sleepUntil(ctx, time.Now().Add(20*time.Millisecond)); err != nil {
			return err
		}
	}
	d.closeAll()
	tl := d.rec.Timeline(d.cfg.Partitions)
	a := timeline.Analyze(tl, w)
	d.mu.Lock()
	reads := d.reads.copy()
	d.mu.Unlock()
	s := judge(a, checkEpochs(a, reads, w.JoinAt), int(d.cfg.Partitions)/(demoConsumers+1), d.cfg.Tolerance)
	if n, _ := prod.Failures(); n > 0 {
		fmt.Fprintf(d.out, "note: %d produce requests failed (not counted as produced)\n", n)
	}
	var failover *demoFailover
	if d.failover != nil {
		failover = <-d.failover
		s.Failures = append(s.Failures, failover.judge(tl, reads, s.SteadyMax)...)
	}
	s.print(d.out, d.cfg.Topic, failover)
	if !s.ok() {
		return errors.New("demo: the summary does not hold: " + strings.Join(s.Failures, "; "))
	}
	return nil
}

// assignment is "c1=[0 1 2 3] c2=[...]".
func (d *demo) assignment() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	parts := make([]string, len(d.consumers))
	for i, c := range d.consumers {
		var ids []int
		for _, p := range c.c.Assigned() {
			ids = append(ids, int(p.Partition))
		}
		sort.Ints(ids)
		parts[i] = fmt.Sprintf("%s=%v", c.name, ids)
	}
	return strings.Join(parts, " ")
}

// closeAll stops the poll loops, then closes every consumer at once
// (final commit, release, leave); later calls do nothing.
func (d *demo) closeAll() {
	d.mu.Lock()
	consumers := d.consumers
	done := d.closed
	d.closed = true
	d.mu.Unlock()
	if done {
		return
	}
	var wg sync.WaitGroup
	for _, c := range consumers {
		c.c.StopPolling()
		c.quiet()
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := c.c.Close(ctx); err != nil {
				fmt.Fprintf(d.out, "warning: %s did not leave cleanly: %v\n", c.name, err)
			}
		}()
	}
	wg.Wait()
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
