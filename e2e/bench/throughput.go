package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/client"
)

// Consumer-level throughput: one consumer reads every record of the
// throughput topic from the start; records/s from creating the consumer
// until the last record was returned by its poll.

// scanDirect reads the topic with a plain franz-go consumer (no group).
func (e *overheadEnv) scanDirect(tb testing.TB) float64 {
	return scanKgo(tb, e.s.Kafka.Addrs(), throughputTopic, e.throughputN, int(e.throughputN)*e.perPart)
}

// scanCapgate reads the topic with the SDK through the gateway, raw
// record batches or JSON, as the only member of a fresh group.
func (e *overheadEnv) scanCapgate(tb testing.TB, raw bool) float64 {
	group := "scan-" + randomID()
	cfg := e.s.ClientConfig(group, []string{throughputTopic}, e.s.credential(tb, group))
	cfg.Raw = raw
	return scanSDK(tb, cfg, int(e.throughputN)*e.perPart, client.WithLogger(e.s.log.Named("scan")))
}

// scanKgo reads want records of topic's parts partitions from the start
// with a plain franz-go consumer (no group) and returns records/s from
// creating the client to the last record polled.
func scanKgo(tb testing.TB, seeds []string, topic string, parts int32, want int) float64 {
	offsets := map[int32]kgo.Offset{}
	for p := range parts {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	start := time.Now()
	got := kgoReadAll(tb, "direct scan", want, kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	return float64(got) / time.Since(start).Seconds()
}

// kgoReadAll creates a kgo client with opts and polls it until it has
// read want records (or fails tb after 2 minutes); it returns how many it
// read (the last poll may bring more than want).
func kgoReadAll(tb testing.TB, what string, want int, opts ...kgo.Opt) int {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got := 0
	for got < want {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			tb.Fatalf("%s: %d of %d records: %v (fetch errors %v)", what, got, want, err, fetches.Errors())
		}
		got += fetches.NumRecords()
	}
	return got
}

// scanSDK reads want records with one SDK consumer, the only member of
// cfg.Group, and returns records/s from creating the consumer (its join
// included) to the last record polled.
func scanSDK(tb testing.TB, cfg client.Config, want int, opts ...client.Option) float64 {
	rate, _ := scanSDKJoin(tb, cfg, want, opts...)
	return rate
}

// scanSDKJoin is scanSDK, also returning how long the join took (from
// creating the consumer to Join returning).
func scanSDKJoin(tb testing.TB, cfg client.Config, want int, opts ...client.Option) (rate float64, join time.Duration) {
	start := time.Now()
	c, err := client.NewConsumer(cfg, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Join(ctx); err != nil {
		tb.Fatalf("scan join: %v", err)
	}
	join = time.Since(start)
	got := 0
	for got < want {
		records, err := c.Poll(ctx)
		if err != nil {
			tb.Fatalf("capgate scan (raw %t): %d of %d records: %v", cfg.Raw, got, want, err)
		}
		got += len(records)
	}
	rate = float64(got) / time.Since(start).Seconds()
	if err := c.Close(ctx); err != nil {
		tb.Logf("scan close: %v", err)
	}
	return rate, join
}

// throughputResult is records/s of each reader, best of the passes.
type throughputResult struct {
	Direct, Raw, JSON float64
	Records           int
}

// runThroughput runs passes of the three readers, interleaved, and keeps
// each one's best pass.
func (e *overheadEnv) runThroughput(tb testing.TB, passes int) throughputResult {
	r := throughputResult{Records: int(e.throughputN) * e.perPart}
	for range passes {
		r.Direct = max(r.Direct, e.scanDirect(tb))
		r.Raw = max(r.Raw, e.scanCapgate(tb, true))
		r.JSON = max(r.JSON, e.scanCapgate(tb, false))
	}
	return r
}

func (r throughputResult) String() string {
	return fmt.Sprintf("direct %.3gM/s raw %.3gM/s json %.3gM/s", r.Direct/1e6, r.Raw/1e6, r.JSON/1e6)
}
