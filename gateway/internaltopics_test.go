package gateway

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/capgate/capgate/api"
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
	h.createTopic(ctx, "capgate-state")
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

// TestHTTPRefusesCapgateStateLogs: a capability for a capgate state log
// (the reserved capgate-state* name space, this deployment's or
// another's: one minted before the name space was reserved, or by a
// coordinator of an older version) was served like any other: its
// holder fetched every group, member id and committed offset of that
// deployment, or wrote into its log. The gateway now refuses fetch and
// produce on such a topic with 403 forbidden; the tenants' topics are
// served as before.
func TestHTTPRefusesCapgateStateLogs(t *testing.T) {
	h := newHarness(t, nil)
	h.waitReady()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h.createTopic(ctx, "capgate-state-other")
	p := int32(0)
	stolen := ocap.Claims{Subject: "thief", Topic: "capgate-state-other", Partition: &p, Ops: ocap.Ops(ocap.OpFetch | ocap.OpProduce)}
	token, _ := h.mint(stolen)
	path := "/v1/topics/capgate-state-other/partitions/0/records"
	r := h.get(token, path+"?offset=earliest")
	expectError(t, r, http.StatusForbidden, api.CodeForbidden)
	if !strings.Contains(string(r.body), "capgate state log") {
		t.Fatalf("fetch of capgate-state-other: %s, want the reason", r.body)
	}
	r = h.do(http.MethodPost, path, token, strings.NewReader(`{"records":[{"value":"eA=="}]}`), "Content-Type", "application/json")
	expectError(t, r, http.StatusForbidden, api.CodeForbidden)
	own, _ := h.mint(capClaims(0))
	if r := h.get(own, recordsPath(0, "offset=earliest")); r.status != http.StatusOK {
		t.Fatalf("fetch of %s/0 with its capability: %d %s", testTopic, r.status, r.body)
	}
}

// createTopic creates topic (one partition) in the harness's Kafka.
func (h *harness) createTopic(ctx context.Context, topic string) {
	h.t.Helper()
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, 1, 1
	create.Topics = append(create.Topics, ct)
	if _, err := h.kc.Request(ctx, create); err != nil {
		h.t.Fatal(err)
	}
}
