package gateway

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/capgate/capgate/api"
)

// TestKafkaCredentialProduceRateLimited is redteam10 #3, the attack as
// its test: a client credential's Produce through the Kafka listener
// was never admitted under a byte rate — its bytes were charged to its
// budget afterwards, but nothing looked at the budget first — and its
// claims were not scoped to the partition, so neither an override
// selecting the credential (by jti or holder) nor one selecting a topic
// and partition slowed it: the rate an operator set with
// PUT /v1/admin/qos, which the HTTP produce enforces (429), did not
// hold on the listener. Now each partition is admitted as over HTTP: a
// spent budget answers NOT_ENOUGH_REPLICAS (nothing written, retry)
// with ThrottleMillis, and the partition override applies there only.
func TestKafkaCredentialProduceRateLimited(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{edit: func(c *Config) { c.KafkaListen = "127.0.0.1:0" }})
	h.waitReady()
	producer := func(token string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(h.gw.KafkaAddr()),
			kgo.SASL(plain.Auth{User: "capgate", Pass: token}.AsMechanism()),
			kgo.DefaultProduceTopic(testTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.DisableIdempotentWrite(), kgo.RecordRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	produce := func(cl *kgo.Client, p int32) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: make([]byte, 1000)}).FirstErr()
	}
	until := time.Now().Add(time.Hour).Unix()

	cred, claims := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, time.Now(), time.Hour)
	h.sync.waitAck(t, h.sync.push(api.SyncResponse{QoS: []api.QoSOverride{{ID: "slow", Selector: api.QoSSelector{JTI: claims.ID}, MaxBytesPerSec: 10, Until: until}}}))
	cl := producer(cred)
	if err := produce(cl, 0); err != nil {
		t.Fatalf("first produce: %v", err)
	}
	if err := produce(cl, 0); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("a produce past the credential's byte rate (10 B/s, 1,000 B spent): %v, want NOT_ENOUGH_REPLICAS (not written, throttled)", err)
	}

	// An override selecting a topic and partition selects a credential's
	// produces there, and only there.
	other, _ := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, time.Now(), time.Hour)
	p := int32(2)
	h.sync.waitAck(t, h.sync.push(api.SyncResponse{QoS: []api.QoSOverride{{ID: "slow-p2", Selector: api.QoSSelector{Topic: testTopic, Partition: &p}, MaxBytesPerSec: 10, Until: until}}}))
	cl = producer(other)
	if err := produce(cl, 2); err != nil {
		t.Fatalf("first produce to %s/2: %v", testTopic, err)
	}
	if err := produce(cl, 2); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("a produce past %s/2's byte rate: %v, want NOT_ENOUGH_REPLICAS", testTopic, err)
	}
	if err := produce(cl, 3); err != nil {
		t.Fatalf("produce to %s/3, which the override does not select: %v", testTopic, err)
	}
}
