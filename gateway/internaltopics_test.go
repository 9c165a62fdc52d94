package gateway

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/capgate/capgate/ocap"
)

// TestKafkaListenerHidesTheCoordinatorsStateTopic: with the coordinator's
// state in Kafka, a client credential for any topic ("*") saw its state
// topic in the listener's Metadata (a classic-protocol client resolving a
// regex would subscribe to it) and could list its offsets. The gateway
// now learns the coordinator's internal topics on the sync reset: Metadata
// leaves them out and ListOffsets answers TOPIC_AUTHORIZATION_FAILED,
// while the tenants' topics stay visible.
func TestKafkaListenerHidesTheCoordinatorsStateTopic(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{
		edit: func(c *Config) { c.KafkaListen, c.KafkaFetchLanes = "127.0.0.1:0", 1 },
		beforeStart: func(h *harness) {
			h.sync.settings = testSettings()
			h.sync.settings.InternalTopics = []string{"capgate-state", "capgate-state-snapshots"}
		},
	})
	h.waitReady()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "capgate-state", 1, 1
	create.Topics = append(create.Topics, ct)
	if _, err := h.kc.Request(ctx, create); err != nil {
		t.Fatal(err)
	}
	cred, _, err := h.minter.Mint(ocap.KindClient, ocap.Claims{Subject: "any", Groups: []string{"*"}, Topics: []string{"*"}}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.gw.KafkaAddr()), kgo.SASL(plain.Auth{User: "capgate", Pass: cred}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	meta := kmsg.NewPtrMetadataRequest() // every topic
	resp, err := cl.Request(ctx, meta)
	if err != nil {
		t.Fatal(err)
	}
	var topics []string
	for _, tp := range resp.(*kmsg.MetadataResponse).Topics {
		topics = append(topics, *tp.Topic)
	}
	if slices.Contains(topics, "capgate-state") || !slices.Contains(topics, testTopic) {
		t.Fatalf("Metadata of every topic for a credential for any topic: %v; want %s, not capgate-state", topics, testTopic)
	}
	list := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "capgate-state"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp = 0, -1
	lt.Partitions = append(lt.Partitions, lp)
	list.Topics = append(list.Topics, lt)
	// kgo splits ListOffsets by leader and reports a partition's refusal
	// as the request's error.
	lresp, err := cl.Request(ctx, list)
	if err == nil {
		err = kerr.ErrorForCode(lresp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode)
	}
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("ListOffsets of the coordinator's state topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}
