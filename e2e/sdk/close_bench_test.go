package sdk_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/gateway"
	"github.com/capgate/capgate/internal/stack"
)

// BenchmarkClose times Consumer.Close of a consumer holding every
// partition of a topic (100 and 2,000) after it read one record of each
// and its long polls run idle: the revoke, the release commits of what
// it processed, the leave, and the goroutines ending. Each round joins a
// new group on the same cluster (the SDK's own HTTP client, as an
// application's), waits until every record was delivered and is timed
// from Close to its return only (ms/close; b.N rounds). BENCHMARKS.md
// §13 has the figures, beside the same file run on an older tree.
func BenchmarkClose(b *testing.B) {
	for _, partitions := range []int32{100, 2000} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) { benchClose(b, partitions) })
	}
}

func benchClose(b *testing.B, partitions int32) {
	tm := sdk.DefaultTiming()
	tm.CapabilityLease = time.Minute // no renewal mid-round
	c := sdk.StartCluster(b, sdk.ClusterOptions{Topic: "wide", Partitions: partitions, Timing: tm,
		GatewayConfig: func(cfg *gateway.Config) { cfg.MaxConnectionsPerAddress = cfg.MaxConnections }})
	ctx := context.Background()
	for p := range partitions {
		if _, err := c.Broker.Produce(ctx, c.Topic, p, []*kgo.Record{{Value: []byte("v")}}); err != nil {
			b.Fatal(err)
		}
	}
	var total time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		group := fmt.Sprintf("close-%d", i)
		cfg := c.Stack.ClientConfig(group, []string{c.Topic}, c.ClientCredential(b, group))
		cfg.RequestTimeout = 30 * time.Second // the join answer carries every capability
		var delivered atomic.Int64
		consumer, err := stack.StartConsumer(ctx, stack.ConsumerOptions{Config: cfg,
			OnRecords: func(_ string, rs []client.Record, _ time.Time) { delivered.Add(int64(len(rs))) }})
		if err != nil {
			b.Fatal(err)
		}
		sdk.Eventually(b, 5*time.Minute, "every record delivered", func() (bool, string) {
			n := delivered.Load()
			return n == int64(partitions), fmt.Sprintf("%d of %d delivered", n, partitions)
		})
		closeCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		b.StartTimer()
		start := time.Now()
		err = consumer.Close(closeCtx)
		total += time.Since(start)
		b.StopTimer()
		cancel()
		if err != nil {
			b.Fatalf("close: %v", err)
		}
		consumer.StopPolling()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/close")
}
