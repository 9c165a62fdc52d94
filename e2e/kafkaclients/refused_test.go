package kafkaclients

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRefusedProduceNeverReachesKafka: a Produce the connection may not
// make — a fetch-only capability naming its own partition and topics
// that do not exist — is refused partition by partition without the
// gateway asking Kafka anything about them: a refusal costs Kafka no
// metadata lookup per topic an attacker makes up.
func TestRefusedProduceNeverReachesKafka(t *testing.T) {
	s := Start(t, Options{Partitions: 2})
	grant := s.Grant(t, "orders", 0, []string{"fetch"}, time.Minute)
	var asked atomic.Int64 // Metadata or Produce requests naming the made-up topics
	cluster := s.Kafka.Cluster()
	cluster.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		for _, t := range kreq.(*kmsg.MetadataRequest).Topics {
			if t.Topic != nil && strings.HasPrefix(*t.Topic, "made-up-") {
				asked.Add(1)
			}
		}
		return nil, nil, false
	})
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		asked.Add(1)
		return nil, nil, false
	})

	r := dialRaw(t, s.KafkaAddrs()[0])
	if resp := r.authenticate("PLAIN", grant.Capability); resp.ErrorCode != 0 {
		t.Fatalf("authenticate: %d", resp.ErrorCode)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 1000
	for i := range 20 {
		req.Topics = append(req.Topics, produceTopic(fmt.Sprintf("made-up-%d", i), 0))
	}
	req.Topics = append(req.Topics, produceTopic("orders", 0)) // its own partition, but no produce op
	resp := r.roundTrip(req).(*kmsg.ProduceResponse)
	for _, rt := range resp.Topics {
		if p := rt.Partitions[0]; p.ErrorCode != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("%s/0: error %d, want TOPIC_AUTHORIZATION_FAILED", rt.Topic, p.ErrorCode)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("a refused Produce made the gateway send Kafka %d requests about it", n)
	}
}

func produceTopic(topic string, partition int32) kmsg.ProduceRequestTopic {
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	p := kmsg.NewProduceRequestTopicPartition()
	p.Partition = partition
	rt.Partitions = append(rt.Partitions, p)
	return rt
}
