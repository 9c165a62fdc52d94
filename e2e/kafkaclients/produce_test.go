package kafkaclients

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestProduceWithScopedCredential: a kgo producer (idempotent, so
// InitProducerId goes through the listener too) writes through the
// listener with a client credential whose tps claim names the topic; the
// records are in Kafka as sent. A credential scoped to "*" is refused.
func TestProduceWithScopedCredential(t *testing.T) {
	s := Start(t, Options{Partitions: 4})
	scoped := s.ClientCredential(t, "producers") // tps: [orders]
	cl := kgoClient(t, s.KafkaAddrs(), scoped, true, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, v := range []string{"a", "b", "c"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 2, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce with a credential scoped to the topic: %v", err)
		}
	}
	direct, err := kgo.NewClient(kgo.SeedBrokers(s.Kafka.Addrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {2: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	got := pollN(t, direct, 3)
	for i, want := range []string{"a", "b", "c"} {
		if string(got[i].Value) != want || got[i].Offset != int64(i) {
			t.Fatalf("record %d in Kafka: %q at %d, want %q at %d", i, got[i].Value, got[i].Offset, want, i)
		}
	}

	wide, err := s.Stack.ClientCredential(ctx, "wide", []string{"producers"}, []string{"*"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cl2 := kgoClient(t, s.KafkaAddrs(), wide, true, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite(),
		kgo.RecordRetries(1))
	err = cl2.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 2, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce with a credential scoped to \"*\": %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}
