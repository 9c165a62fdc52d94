package sdk

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/coordinator"
)

// LoadOptions configure StartLoad.
type LoadOptions struct {
	// Interval between two records of one partition (default 10ms).
	Interval time.Duration
	// ViaGateway produces through the gateways with client.Producer and a
	// produce capability per partition minted by POST /v1/admin/capabilities;
	// otherwise straight to Kafka with the cluster's broker client.
	ViaGateway bool
	// Gateways overrides the cluster's gateway URLs (ViaGateway only).
	Gateways []string
}

// Load writes uniquely numbered records ("p<partition>-<seq>") to every
// partition of the cluster's topic, one goroutine per partition, until
// Stop. Failed produces are counted, not retried: Kafka's log is the
// ground truth of what must be delivered (see Cluster.LogEnd).
type Load struct {
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	transport *Transport // of the gateway producers

	mu       sync.Mutex
	produced map[int32]map[int64]string // offset -> value, when known
	failures int
	lastErr  error
}

// StartLoad starts producing.
func (c *Cluster) StartLoad(t testing.TB, opts LoadOptions) *Load {
	t.Helper()
	if opts.Interval <= 0 {
		opts.Interval = 10 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Load{cancel: cancel, transport: NewTransport(), produced: map[int32]map[int64]string{}}
	for p := range c.Partitions {
		l.produced[p] = map[int64]string{}
	}
	for p := range c.Partitions {
		send := c.directProduce(p)
		if opts.ViaGateway {
			send = c.gatewayProduce(t, l, p, opts.Gateways)
		}
		l.wg.Add(1)
		go l.run(ctx, p, opts.Interval, send)
	}
	t.Cleanup(l.Stop)
	return l
}

type produceFunc func(ctx context.Context, value string) (int64, error)

func (c *Cluster) directProduce(p int32) produceFunc {
	return func(ctx context.Context, value string) (int64, error) {
		return c.Broker.Produce(ctx, c.Topic, p, []*kgo.Record{{Value: []byte(value)}})
	}
}

func (c *Cluster) gatewayProduce(t testing.TB, l *Load, p int32, gateways []string) produceFunc {
	t.Helper()
	var grant api.CapabilityResponse
	req := coordinator.SharedGrantRequest{Topic: c.Topic, Partition: p, Ops: []string{"produce"}, TTLMs: 10 * 60 * 1000, Holder: "e2e-producer"}
	if status, raw := c.Admin(t, http.MethodPost, "/v1/admin/capabilities", req, &grant); status != http.StatusOK {
		t.Fatalf("mint produce capability: %d %s", status, raw)
	}
	if len(gateways) == 0 {
		gateways = c.GatewayURLs()
	}
	producer, err := client.NewProducer(gateways, grant.Capability,
		client.WithLogger(c.log.Named("producer")), client.WithHTTPClient(&http.Client{Transport: l.transport}))
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context, value string) (int64, error) {
		return producer.Produce(ctx, c.Topic, p, []client.Record{{Value: []byte(value)}})
	}
}

func (l *Load) run(ctx context.Context, p int32, interval time.Duration, send produceFunc) {
	defer l.wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for seq := 0; ; seq++ {
		value := fmt.Sprintf("p%d-%06d", p, seq)
		// Not ctx: a produce abandoned by Stop could still land in Kafka
		// after LogEnd was read.
		callCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		offset, err := send(callCtx, value)
		cancel()
		l.mu.Lock()
		if err == nil {
			l.produced[p][offset] = value
		} else {
			l.failures++
			l.lastErr = err
		}
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Stop stops producing and waits for the produce calls in flight to
// finish.
func (l *Load) Stop() {
	l.cancel()
	l.wg.Wait()
	l.transport.CloseIdleConnections()
}

// Produced returns the value produced at each known offset of p.
func (l *Load) Produced(p int32) map[int64]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int64]string, len(l.produced[p]))
	for o, v := range l.produced[p] {
		out[o] = v
	}
	return out
}

// Count is how many records were produced with a known offset.
func (l *Load) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.produced {
		n += len(m)
	}
	return n
}

// Failures reports the produce calls that failed and the last error.
func (l *Load) Failures() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failures, l.lastErr
}

// LogEnd reads every partition's end offset from Kafka: everything below
// it must be delivered.
func (c *Cluster) LogEnd(t testing.TB) map[int32]int64 {
	t.Helper()
	out := make(map[int32]int64, c.Partitions)
	for p := range c.Partitions {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, latest, err := c.Broker.Offsets(ctx, c.Topic, p)
		cancel()
		if err != nil {
			t.Fatalf("log end of %d: %v", p, err)
		}
		out[p] = latest
	}
	return out
}
