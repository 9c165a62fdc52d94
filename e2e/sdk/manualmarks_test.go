package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestManualMarksRevokeWaitsForTheBatchInHand is redteam5 #3 on real
// parts: a ManualMarks consumer (as `capgate consume`, which marks a batch
// once printed) holds a batch Poll returned when a second member joins
// and the partition of that batch is revoked from it. The partition must
// not be released — so not granted to the newcomer, which would read the
// same records at the same time — until the first is done with the
// batch: it marks its last record, or polls again (released at the
// marked offset: what it left unmarked goes to the newcomer, after it),
// or revoke_timeout passes (released at the marked offset, logged).
// Across both members no offset is delivered to one while the other still
// holds it. The bug released the partition as soon as the (absent)
// OnRevoke returned: the newcomer was granted it while the batch was
// still held.
func TestManualMarksRevokeWaitsForTheBatchInHand(t *testing.T) {
	t.Parallel()
	timing := sdk.DefaultTiming()
	timing.HandoffTimeout = time.Minute       // only a's release (or its revoke_timeout) moves the partition
	timing.CapabilityLease = 20 * time.Second // a's revoked capability outlives every wait here
	c := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "marks", Partitions: 2, Timing: timing})
	const backlog, after = 300, 20
	// Records on partition 1 only: a's first Poll returns only records of
	// it, and the sticky assignor gives a newcomer the highest-numbered
	// partition of a member holding two.
	produceTo(t, c, 1, backlog)

	for _, tc := range []struct {
		name          string
		revokeTimeout time.Duration
		marked        int // records of the batch a marks before the revoke
		// done is what a does with its batch once the handoff waits only
		// for its release; it returns the offset a's release must carry.
		done func(t *testing.T, a *client.Consumer, batch []client.Record) int64
	}{
		{"mark", 30 * time.Second, 0, func(t *testing.T, a *client.Consumer, batch []client.Record) int64 {
			a.Mark(batch...)
			return batch[len(batch)-1].Offset + 1
		}},
		{"poll", 30 * time.Second, 2, func(t *testing.T, a *client.Consumer, batch []client.Record) int64 {
			ctx, cancel := context.WithCancel(context.Background())
			polled := make(chan error, 1)
			go func() { _, err := a.Poll(ctx); polled <- err }() // partition 0 has nothing: it waits
			t.Cleanup(func() { cancel(); <-polled })
			return batch[1].Offset + 1
		}},
		{"revoke timeout", 2 * time.Second, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			group := "marks-" + strings.ReplaceAll(tc.name, " ", "-")
			logs, observed := observer.New(zap.WarnLevel)
			aRevoked := make(chan []client.Partition, 4) // this revoke, then Close's
			var revoked time.Time
			aCommits := &commitRecorder{base: http.DefaultTransport.(*http.Transport).Clone()}
			a := manualMember(t, c, group, "a", func(cfg *client.Config) { cfg.RevokeTimeout = tc.revokeTimeout },
				client.WithHTTPClient(&http.Client{Transport: aCommits}),
				client.WithLogger(zap.New(zapcore.NewTee(sdk.Logger(t).Named("a").Core(), logs))),
				client.OnRevoke(func(_ context.Context, ps []client.Partition) {
					if revoked.IsZero() {
						revoked = time.Now() // read after the channel's receive
					}
					aRevoked <- ps
				}))

			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			batch, err := a.Poll(ctx)
			if err != nil || len(batch) < 2 {
				t.Fatalf("a's first poll: %d records, %v", len(batch), err)
			}
			for _, r := range batch {
				if r.Partition != 1 {
					t.Fatalf("a's batch holds a record of partition %d", r.Partition)
				}
			}
			held := time.Now()
			a.Mark(batch[:tc.marked]...)

			bTransport := sdk.NewTransport()
			bGrants := make(chan time.Time, 4)
			b := manualMember(t, c, group, "b", nil,
				client.WithHTTPClient(&http.Client{Transport: bTransport}),
				client.OnGrant(func(ps []client.Partition) {
					if !slices.Equal(ps, []client.Partition{{Topic: c.Topic, Partition: 1}}) {
						t.Errorf("b granted %v, want partition 1 only", ps)
					}
					bGrants <- time.Now()
				}))
			t.Cleanup(bTransport.CloseIdleConnections)
			bDelivered := pollAndMark(t, b)

			if ps := recvBefore(t, aRevoked, "a's revoke hook"); !slices.Equal(ps, []client.Partition{{Topic: c.Topic, Partition: 1}}) {
				t.Fatalf("a revoked %v, want partition 1 only", ps)
			}
			var doneAt time.Time
			var want int64
			if tc.done != nil {
				waitOnlyForRelease(t, c, group, bTransport)
				doneAt = time.Now()
				want = tc.done(t, a, batch)
			} else {
				want = batch[tc.marked-1].Offset + 1
			}
			granted := recvBefore(t, bGrants, "b's grant of partition 1")

			if tc.done != nil && granted.Before(doneAt) {
				t.Errorf("b granted partition 1 %v before a was done with its batch (%s)", doneAt.Sub(granted), tc.name)
			}
			if tc.done == nil && granted.Sub(revoked) < tc.revokeTimeout-250*time.Millisecond {
				t.Errorf("b granted partition 1 %v after a's revoke hook, want revoke_timeout %s", granted.Sub(revoked), tc.revokeTimeout)
			}
			releases := aCommits.releases()
			if len(releases) != 1 || releases[0].offset != want {
				t.Fatalf("a's releases of partition 1 %+v, want one at %d", releases, want)
			}
			if tc.done != nil && releases[0].at.Before(doneAt) {
				t.Errorf("a released partition 1 %v before it was done with its batch", doneAt.Sub(releases[0].at))
			}
			if tc.done == nil {
				checkRevokeTimeoutLogged(t, observed, want, batch)
			}

			// b reads partition 1 from a's release on, once each, only
			// after a is done with what it held (or its revoke_timeout),
			// and what is produced after.
			produceTo(t, c, 1, after)
			deliveries := bDelivered.until(t, c.LogEnd(t)[1]) // the other subtests write too
			if deliveries[0].offset != want {
				t.Errorf("b's first record of partition 1 is at %d, want a's release offset %d", deliveries[0].offset, want)
			}
			inHand := map[int64]bool{}
			for _, r := range batch[tc.marked:] {
				inHand[r.Offset] = true
			}
			for i, d := range deliveries {
				if d.offset != want+int64(i) {
					t.Fatalf("b's records of partition 1: offset %d at position %d, want %d (once each, in order)", d.offset, i, want+int64(i))
				}
				if inHand[d.offset] && d.at.Before(doneAt) {
					t.Errorf("offset %d delivered to b %v before a was done with it", d.offset, doneAt.Sub(d.at))
				}
			}
			t.Logf("%s: a held %d records from %v; revoke hook %v later; b granted %v after the hook, released at %d; b read %d records",
				tc.name, len(batch), held.Format(time.TimeOnly), revoked.Sub(held).Round(time.Millisecond),
				granted.Sub(revoked).Round(time.Millisecond), want, len(deliveries))
		})
	}
}

// manualMember joins a ManualMarks consumer without timed commits (only
// its releases commit) to the cluster's topic; closed at cleanup.
func manualMember(t *testing.T, c *sdk.Cluster, group, name string, configure func(*client.Config), opts ...client.Option) *client.Consumer {
	t.Helper()
	cfg := c.ClientConfig(sdk.MemberOptions{Group: group}, c.ClientCredential(t, group))
	cfg.ClientID, cfg.ManualMarks, cfg.CommitInterval = name, true, 0
	if configure != nil {
		configure(&cfg)
	}
	opts = append([]client.Option{client.WithLogger(sdk.Logger(t).Named(name))}, opts...) // a later WithLogger wins
	m, err := client.NewConsumer(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := m.Join(ctx); err != nil {
		t.Fatalf("%s: join: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("%s: close: %v", name, err)
		}
	})
	return m
}

// recvBefore waits for ch's next value, at most wait.
func recvBefore[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("no %s within %s", what, wait)
		var zero T
		return zero
	}
}

// waitOnlyForRelease waits until the coordinator's handoff of partition 1
// waits only for a's release (revoking, every gateway safe, not
// released) and one heartbeat of b sent after that was answered: the
// buggy release, sent when the hook returned, would have reached the
// coordinator long before, and b would have been granted the partition.
func waitOnlyForRelease(t *testing.T, c *sdk.Cluster, group string, b *sdk.Transport) {
	t.Helper()
	var view string
	sdk.Eventually(t, wait, "the handoff of partition 1 waiting for a's release alone", func() (bool, string) {
		for _, p := range c.Describe(t, group).Partitions {
			if p.Partition == 1 {
				view = fmt.Sprintf("state %s, gateways safe %v, released %v", p.State, p.GatewaysSafe, p.Released)
				return p.State != "revoking" || (p.GatewaysSafe && !p.Released), view
			}
		}
		return false, "partition 1 not described"
	})
	if !strings.HasPrefix(view, "state revoking") || strings.HasSuffix(view, "released true") {
		t.Fatalf("partition 1 handed on while a still holds its batch: %s", view)
	}
	sent := b.Calls("heartbeat")
	sdk.Eventually(t, wait, "a heartbeat of b answered", func() (bool, string) {
		n := b.Calls("heartbeat")
		return n >= sent+2, fmt.Sprintf("%d heartbeats sent since", n-sent)
	})
}

// delivery is one record of partition 1 a member's Poll returned.
type delivery struct {
	offset int64
	at     time.Time
}

// deliveries is what a poll loop delivered of partition 1.
type deliveries struct {
	mu  sync.Mutex
	got []delivery
}

// pollAndMark polls m until cleanup, marking every record once its Poll
// returned (as `capgate consume` does once printed); records of partition
// 1 are recorded with the time Poll returned them.
func pollAndMark(t *testing.T, m *client.Consumer) *deliveries {
	d := &deliveries{}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for ctx.Err() == nil {
			records, err := m.Poll(ctx)
			if err != nil {
				return
			}
			now := time.Now()
			d.mu.Lock()
			for _, r := range records {
				if r.Partition == 1 {
					d.got = append(d.got, delivery{r.Offset, now})
				}
			}
			d.mu.Unlock()
			m.Mark(records...)
		}
	}()
	t.Cleanup(func() { cancel(); <-stopped })
	return d
}

// until waits until the records of partition 1 up to end were delivered
// and returns them all.
func (d *deliveries) until(t *testing.T, end int64) []delivery {
	t.Helper()
	var got []delivery
	sdk.Eventually(t, wait, fmt.Sprintf("b's records of partition 1 up to %d", end), func() (bool, string) {
		d.mu.Lock()
		got = slices.Clone(d.got)
		d.mu.Unlock()
		if len(got) == 0 {
			return false, "none"
		}
		last := got[len(got)-1].offset
		return last >= end-1, fmt.Sprintf("%d records, up to offset %d", len(got), last)
	})
	return got
}

// checkRevokeTimeoutLogged: a's log warns that partition 1 was released
// at revoke_timeout at offset want while it held records up to the end of
// its batch.
func checkRevokeTimeoutLogged(t *testing.T, observed *observer.ObservedLogs, want int64, batch []client.Record) {
	t.Helper()
	const key = "marks/1"
	value := fmt.Sprintf("%d..%d", want, batch[len(batch)-1].Offset+1)
	for _, e := range observed.FilterMessageSnippet("revoke_timeout passed").All() {
		if e.ContextMap()[key] == value {
			return
		}
	}
	t.Errorf("no warning that partition 1 was released at revoke_timeout (%s=%s); warnings: %v", key, value, observed.All())
}

// commitRecorder is a's transport: it records the release commits a
// sends of partition 1 (offset, when sent).
type commitRecorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	rel  []releaseSent
}

type releaseSent struct {
	offset int64
	at     time.Time
}

func (r *commitRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/commit") && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		var commit api.CommitRequest
		if json.Unmarshal(body, &commit) == nil && commit.Release {
			r.mu.Lock()
			for _, o := range commit.Offsets {
				if o.Partition == 1 {
					r.rel = append(r.rel, releaseSent{o.Offset, time.Now()})
				}
			}
			r.mu.Unlock()
		}
	}
	return r.base.RoundTrip(req)
}

func (r *commitRecorder) releases() []releaseSent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.rel)
}
