package client

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// waitLimit bounds every wait in these tests; nothing should come close.
// A deadline only (the tests take as long with it as with 5 s, which a
// join or close under the race detector on 2 busy cores could pass).
const waitLimit = 30 * time.Second

var (
	p0 = Partition{Topic: "orders", Partition: 0}
	p1 = Partition{Topic: "orders", Partition: 1}
)

// env is one fake coordinator and two fake gateways sharing a store.
type env struct {
	t     *testing.T
	coord *fakeCoordinator
	store *store
	gw1   *fakeGateway
	gw2   *fakeGateway
}

func newEnv(t *testing.T, grants func(join int) []api.Grant) *env {
	t.Helper()
	s := newStore()
	return &env{
		t: t, coord: newFakeCoordinator(t, grants), store: s,
		gw1: newFakeGateway(t, "gw1", s), gw2: newFakeGateway(t, "gw2", s),
	}
}

// config points a consumer at the env with fast timings.
func (e *env) config() Config {
	cfg := DefaultConfig()
	cfg.CoordinatorURL = e.coord.srv.URL + "/" // trailing slashes are trimmed
	cfg.Gateways = []string{e.gw1.srv.URL, e.gw2.srv.URL + "/"}
	cfg.Group = "billing"
	cfg.Topics = []string{"orders"}
	cfg.InstanceID = "svc-7"
	cfg.Credential = testCredential
	cfg.HeartbeatWait = 300 * time.Millisecond
	cfg.FetchMaxWait = 50 * time.Millisecond
	cfg.RequestTimeout = 2 * time.Second
	cfg.RevokeTimeout = 2 * time.Second
	cfg.CapabilityExpiryMargin = 500 * time.Millisecond
	cfg.RetryBackoff = 5 * time.Millisecond
	cfg.RetryBackoffMax = 50 * time.Millisecond
	return cfg
}

// start builds and joins a consumer; it is closed at cleanup.
func (e *env) start(cfg Config, opts ...Option) *Consumer {
	e.t.Helper()
	c, err := NewConsumer(cfg, append(opts, withFullChecks())...)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := c.Join(ctx); err != nil {
		e.t.Fatalf("join: %v", err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		c.Close(ctx)
	})
	return c
}

// grantOf grants p and lets the store admit its capability.
func (e *env) grantOf(p Partition, epoch uint64, offset int64, capability string) api.Grant {
	e.store.allow(capability, p)
	return api.Grant{
		Topic: p.Topic, Partition: p.Partition, Epoch: epoch, Offset: offset,
		Capability: capability, ExpiresAt: time.Now().Add(time.Hour).Format(time.RFC3339Nano),
	}
}

// pollUntil polls until done holds for everything polled so far.
func pollUntil(t *testing.T, c *Consumer, done func([]Record) bool) []Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var all []Record
	for !done(all) {
		records, err := c.Poll(ctx)
		if err != nil {
			t.Fatalf("poll: %v (after %d records: %v)", err, len(all), offsets(all, p0))
		}
		all = append(all, records...)
	}
	return all
}

// countOf is a pollUntil condition: n records of p.
func countOf(p Partition, n int) func([]Record) bool {
	return func(rs []Record) bool { return len(offsets(rs, p)) >= n }
}

func offsets(rs []Record, p Partition) []int64 {
	var out []int64
	for _, r := range rs {
		if r.Topic == p.Topic && r.Partition == p.Partition {
			out = append(out, r.Offset)
		}
	}
	return out
}

func sequence(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func checkSequence(t *testing.T, rs []Record, p Partition, from, to int64) {
	t.Helper()
	if got := offsets(rs, p); !slices.Equal(got, sequence(from, to)) {
		t.Fatalf("%s delivered offsets %v, want %d..%d once each, in order", p, got, from, to-1)
	}
}

// recv waits for one value from ch.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		var zero T
		t.Fatalf("timed out waiting for %s", what)
		return zero
	}
}

// waitFor polls cond until it holds (for state behind real sockets).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// hookLog records hook calls.
type hookLog struct {
	revoked chan []Partition
	granted chan []Partition
	lost    chan []Partition
}

func newHookLog() *hookLog {
	return &hookLog{revoked: make(chan []Partition, 8), granted: make(chan []Partition, 8), lost: make(chan []Partition, 8)}
}

func (h *hookLog) options() []Option {
	return []Option{
		OnRevoke(func(_ context.Context, ps []Partition) { h.revoked <- ps }),
		OnGrant(func(ps []Partition) { h.granted <- ps }),
		OnLost(func(ps []Partition) { h.lost <- ps }),
	}
}

type apiGrant = api.Grant

func revokeOf(p Partition, epoch uint64) api.HeartbeatResponse {
	return api.HeartbeatResponse{Revoke: []api.PartitionRef{{Topic: p.Topic, Partition: p.Partition, Epoch: epoch}}}
}

func closeNow(t *testing.T, c *Consumer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// withFullChecks makes the session assert its buffer invariants on every step.
func withFullChecks() Option { return func(o *options) { o.fullChecks = true } }

// requestLog records, in the consumer's own order, every request it
// begins and ends, plus markers the test adds.
type requestLog struct {
	mu     sync.Mutex
	events []string
}

func (l *requestLog) add(event string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, event)
}

// begin logs a request unless its context already ended (then it is never
// sent). Checking under the log's lock orders it against markers: a
// request logged after a marker was alive after the marker was added.
func (l *requestLog) begin(ctx context.Context, event string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ctx.Err() == nil {
		l.events = append(l.events, event)
	}
}

func (l *requestLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

// recordingTransport logs "begin PATH" and "end PATH STATUS".
type recordingTransport struct {
	next http.RoundTripper
	log  *requestLog
}

func (rt recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.log.begin(r.Context(), "begin "+r.URL.Path)
	resp, err := rt.next.RoundTrip(r)
	status := 0
	if err == nil {
		status = resp.StatusCode
	}
	rt.log.add(fmt.Sprintf("end %s %d", r.URL.Path, status))
	return resp, err
}

func withRequestLog(l *requestLog) Option {
	return WithHTTPClient(&http.Client{Transport: recordingTransport{next: newHTTPClient(nil, 0).Transport, log: l}})
}

// beginsAfter lists the events "begin path" after the first event equal to marker.
func beginsAfter(events []string, marker, path string) []string {
	i := slices.Index(events, marker)
	if i < 0 {
		return []string{"marker " + marker + " missing"}
	}
	var out []string
	for _, e := range events[i+1:] {
		if e == "begin "+path {
			out = append(out, e)
		}
	}
	return out
}
