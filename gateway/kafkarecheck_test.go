package gateway

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// TestKafkaFetchFencedAfterBrokerAnsweredStillRefuses: the Kafka
// listener's TestFenceAfterBrokerAnsweredStillRefuses. The fence lands
// while Kafka answers the gateway's Fetch, after the cancel a revocation
// sends could have stopped it (the answer was read first), so the
// decision taken again after the broker answered (kafkaGate.Recheck,
// kafkaproto answerPartition) is all that stands between the fenced
// capability and the records: the partition is answered
// TOPIC_AUTHORIZATION_FAILED, not one record. The fence is raised in the
// view directly from kfake's handling of that Fetch — the order the race
// takes, made certain; the sync channel would cancel the wait too.
// Before, only the key-retired half of the recheck was tested on this
// path (TestKeyRotationEndsKafkaCapabilitySessions): taking Decide out of
// kafkaGate.Recheck failed no test.
func TestKafkaFetchFencedAfterBrokerAnsweredStillRefuses(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{edit: func(c *Config) { c.KafkaListen = "127.0.0.1:0" }})
	h.waitReady()
	token, _ := h.mint(capClaims(0)) // group g, epoch 1
	h.produce(0, 2)
	var raised atomic.Bool
	h.kafka.Cluster().ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		// The gateway's first Fetch to Kafka, now being answered: a newer
		// epoch of the partition lands before the answer is decided.
		raised.Store(h.gw.view.Raise("g", testTopic, 0, 2))
		return nil, nil, false // Kafka answers it, with both records
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.gw.KafkaAddr()), kgo.SASL(plain.Auth{User: "capgate", Pass: token}.AsMechanism()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{testTopic: {0: kgo.NewOffset().At(0)}}), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		f := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("no refusal of the fenced capability before %v (fence raised in Kafka's answer: %v)", err, raised.Load())
		}
		if n := f.NumRecords(); n > 0 {
			t.Fatalf("the capability fenced while Kafka answered read %d records (fence raised: %v)", n, raised.Load())
		}
		var refused error
		f.EachError(func(_ string, _ int32, err error) { refused = err })
		if refused == nil {
			continue
		}
		if !errors.Is(refused, kerr.TopicAuthorizationFailed) {
			t.Fatalf("refused %v, want TOPIC_AUTHORIZATION_FAILED", refused)
		}
		if !raised.Load() {
			t.Fatal("refused before the fence was raised in Kafka's answer: the test did not run its race")
		}
		return
	}
}
