package kafkaclients

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKgoAssignModeCapability: a kgo consumer authenticated with a
// partition capability consumes exactly that partition through the
// listener, record batches untouched (keys, values, offsets as produced).
func TestKgoAssignModeCapability(t *testing.T) {
	s := Start(t, Options{Partitions: 4})
	produceDirect(t, s, "orders", 2, 10)
	cap := s.Grant(t, "orders", 2, []string{"fetch"}, time.Minute)
	cl := kgoClient(t, s.KafkaAddrs(), cap.Capability, false,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {2: kgo.NewOffset().AtStart()}}))
	got := pollN(t, cl, 10)
	for i, r := range got {
		if r.Partition != 2 || r.Offset != int64(i) || string(r.Value) != fmt.Sprintf("v%d", i) {
			t.Fatalf("record %d: partition %d offset %d value %q", i, r.Partition, r.Offset, r.Value)
		}
	}
}

// produceDirect writes n records "v0".."v<n-1>" to topic/partition
// straight to Kafka (ground truth).
func produceDirect(t testing.TB, s *Stack, topic string, partition int32, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Kafka.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: partition, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// pollN polls until n records arrived (or fails the test after 15s).
func pollN(t testing.TB, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("got %d of %d records: %v", len(out), n, fs.Errors())
		}
		for _, e := range fs.Errors() {
			t.Logf("fetch error: %v", e)
		}
		out = append(out, fs.Records()...)
	}
	return out
}
