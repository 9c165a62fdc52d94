package sdk

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/internal/stack"
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
// partition of the cluster's topic, one goroutine per partition
// (stack.Producer), until Stop. Failed produces are counted, not retried:
// Kafka's log is the ground truth of what must be delivered (see
// Cluster.LogEnd).
type Load struct {
	*stack.Producer
	transport *Transport // of the gateway producers

	mu       sync.Mutex
	produced map[int32]map[int64]string // offset -> value, when known
}

// StartLoad starts producing.
func (c *Cluster) StartLoad(t testing.TB, opts LoadOptions) *Load {
	t.Helper()
	l := &Load{transport: NewTransport(), produced: map[int32]map[int64]string{}}
	for p := range c.Partitions {
		l.produced[p] = map[int64]string{}
	}
	popts := stack.ProducerOptions{Topic: c.Topic, Partitions: c.Partitions, Interval: opts.Interval,
		OnAck: func(p int32, offset int64, rec *kgo.Record, _ time.Time) {
			l.mu.Lock()
			l.produced[p][offset] = string(rec.Value)
			l.mu.Unlock()
		}}
	if opts.ViaGateway {
		popts.Send = c.gatewayProduce(t, l, opts.Gateways)
	}
	l.Producer = c.Stack.StartProducer(popts)
	t.Cleanup(l.Stop)
	return l
}

// gatewayProduce sends through the gateways with client.Producer and a
// produce capability per partition minted by POST /v1/admin/capabilities.
func (c *Cluster) gatewayProduce(t testing.TB, l *Load, gateways []string) func(context.Context, int32, *kgo.Record) (int64, error) {
	t.Helper()
	if len(gateways) == 0 {
		gateways = c.GatewayURLs()
	}
	producers := make([]*client.Producer, c.Partitions)
	for p := range c.Partitions {
		var grant api.CapabilityResponse
		req := coordinator.SharedGrantRequest{Topic: c.Topic, Partition: p, Ops: []string{"produce"}, TTLMs: 10 * 60 * 1000, Holder: "e2e-producer"}
		if status, raw := c.Admin(t, http.MethodPost, "/v1/admin/capabilities", req, &grant); status != http.StatusOK {
			t.Fatalf("mint produce capability: %d %s", status, raw)
		}
		producer, err := client.NewProducer(gateways, grant.Capability,
			client.WithLogger(c.log.Named("producer")), client.WithHTTPClient(&http.Client{Transport: l.transport}))
		if err != nil {
			t.Fatal(err)
		}
		producers[p] = producer
	}
	return func(ctx context.Context, p int32, rec *kgo.Record) (int64, error) {
		return producers[p].Produce(ctx, c.Topic, p, []client.Record{{Value: rec.Value}})
	}
}

// Stop stops producing and waits for the produce calls in flight to
// finish.
func (l *Load) Stop() {
	l.Producer.Stop()
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
