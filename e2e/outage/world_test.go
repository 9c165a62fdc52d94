package outage

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/internal/stack"
	"github.com/capgate/capgate/internal/timeline"
)

const (
	topic      = "orders"
	groupName  = "outage"
	partitions = int32(12)
	interval   = 20 * time.Millisecond // one record per partition this often
)

// world is one stack with a steady stream and a group of SDK consumers
// named m1, m2, … whose deliveries and hook calls a Recorder keeps.
type world struct {
	tb   testing.TB
	s    *stack.Stack
	rec  *timeline.Recorder
	prod *stack.Producer
	cred string
	// commitEvery is the consumers' periodic commit (0: none; the SDK
	// still commits on revoke and close). A commit blocks the poll loop
	// while no coordinator answers (up to request_timeout).
	commitEvery time.Duration
	// edit adjusts each consumer's configuration (nil: as the stack says);
	// http is the consumers' HTTP client (nil: the SDK's own).
	edit func(*client.Config)
	http *http.Client

	mu   sync.Mutex
	cons map[string]*stack.Consumer
}

func startWorld(tb testing.TB, opts stack.Options) *world {
	tb.Helper()
	opts.Dir = tb.TempDir()
	opts.Topics = map[string]int32{topic: partitions}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := stack.Start(ctx, opts)
	if err != nil {
		tb.Fatal(err)
	}
	w := &world{tb: tb, s: s, rec: timeline.NewRecorder(), cons: map[string]*stack.Consumer{}, commitEvery: 200 * time.Millisecond}
	tb.Cleanup(w.close)
	if w.cred, err = s.ClientCredential(ctx, "outage", []string{groupName}, []string{topic}, time.Hour); err != nil {
		tb.Fatal(err)
	}
	w.prod = s.StartProducer(stack.ProducerOptions{Topic: topic, Partitions: partitions, Interval: interval,
		OnAck: func(p int32, offset int64, _ *kgo.Record, _ time.Time) { w.rec.Acked(p, offset) }})
	return w
}

// add starts consumer name (through every gateway of the stack).
func (w *world) add(name string) {
	w.tb.Helper()
	cfg := w.s.ClientConfig(groupName, []string{topic}, w.cred)
	if w.edit != nil {
		w.edit(&cfg)
	}
	// The context runs the poll loop too: it ends with the consumer.
	c, err := stack.StartConsumer(context.Background(), stack.ConsumerOptions{Config: cfg, CommitEvery: w.commitEvery, HTTP: w.http,
		OnRecords: func(_ string, rs []client.Record, at time.Time) {
			for _, r := range rs {
				w.rec.Deliver(name, r.Partition, r.Offset, at)
			}
		},
		OnHook: func(h stack.Hook, ps []client.Partition, at time.Time) {
			ids := make([]int32, len(ps))
			for i, p := range ps {
				ids[i] = p.Partition
			}
			w.rec.Hold(name, ids, h == stack.HookGrant, at)
		}})
	if err != nil {
		w.tb.Fatalf("consumer %s: %v", name, err)
	}
	w.mu.Lock()
	w.cons[name] = c
	w.mu.Unlock()
}

// remove closes consumer name (it commits, releases and leaves).
func (w *world) remove(name string) {
	w.mu.Lock()
	c := w.cons[name]
	delete(w.cons, name)
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		w.tb.Logf("close %s: %v", name, err)
	}
}

func (w *world) names() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.cons))
	for n := range w.cons {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// settled waits until the members held everything evenly and consumed it
// with nothing moving for quiet, or timeout; it returns when.
func (w *world) settled(quiet, timeout time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(timeout)
	for {
		now := time.Now()
		if w.rec.Settled(partitions, w.names(), now.Add(-quiet), now) {
			return now, true
		}
		if now.After(deadline) {
			return now, false
		}
		time.Sleep(20 * time.Millisecond) // polling what the consumers recorded
	}
}

// drained waits (bounded) until every acknowledged record was delivered.
func (w *world) drained(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for !w.rec.Drained() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

func (w *world) close() {
	w.prod.Stop()
	for _, n := range w.names() {
		w.remove(n)
	}
	if err := w.s.Close(); err != nil {
		w.tb.Logf("stack close: %v", err)
	}
}

// revoke moves partition p by an admin revoke and returns how long the
// coordinator took to answer (it answers once every gateway is safe).
func (w *world) revoke(p int32) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	// The stack's own client gives up after 30 s; a revoke may wait for a
	// capability lease.
	hc := &http.Client{Timeout: 3 * time.Minute}
	status, body, err := stack.DoJSON(ctx, hc, http.MethodPost,
		fmt.Sprintf("%s/v1/admin/groups/%s/partitions/%s/%d/revoke", w.s.CoordinatorURL(), groupName, topic, p),
		w.s.AdminToken, coordinator.RevokeRequest{Reason: "outage benchmark"}, nil)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("revoke: %d %s", status, body)
	}
	return time.Since(start), err
}

// stepResult is one step's analysis: the pause of every partition from
// the step's start until the group settled again, beyond the steady
// state before the first step.
type stepResult struct {
	Name string
	timeline.Analysis
}

func (w *world) analyze(name string, steadyFrom, from, end time.Time) stepResult {
	a := timeline.Analyze(w.rec.Timeline(partitions), timeline.Window{SteadyFrom: steadyFrom, JoinAt: from, End: end})
	return stepResult{Name: name, Analysis: a}
}

func (r stepResult) String() string {
	return fmt.Sprintf("%s: moved %d pause p50 %s max %s (beyond steady p50 %s max %s); unmoved max %s beyond steady %s; steady max %s; lost %d of %d",
		r.Name, len(r.Moved), r.MovedPause.P50, r.MovedPause.Max, r.MovedExtra.P50, r.MovedExtra.Max,
		r.UnmovedPause.Max, r.UnmovedExtra.Max, r.SteadyMax, r.Lost, r.Produced)
}
