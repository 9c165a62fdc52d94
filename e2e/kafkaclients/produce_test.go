package kafkaclients

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/coordinator"
)

// mintCredential mints a client credential through the admin API
// (POST /v1/admin/clients) for group "producers".
func mintCredential(t testing.TB, s *Stack, name string, topics, ops []string) coordinator.ClientResponse {
	t.Helper()
	var out coordinator.ClientResponse
	req := coordinator.ClientRequest{Name: name, Groups: []string{"producers"}, Topics: topics, Ops: ops, TTLMs: time.Hour.Milliseconds()}
	if status, raw := s.Admin(t, http.MethodPost, "/v1/admin/clients", req, &out); status != http.StatusOK {
		t.Fatalf("mint %s: %d %s", name, status, raw)
	}
	return out
}

// endOffset is partition's log end offset in Kafka itself (not through
// a gateway).
func endOffset(t testing.TB, s *Stack, topic string, partition int32) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(directClient(t, s)).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, ok := ends.Lookup(topic, partition)
	if !ok || end.Err != nil {
		t.Fatalf("end offset of %s/%d: %v", topic, partition, end.Err)
	}
	return end.Offset
}

// TestConsumerCredentialCannotProduce is redteam2's G: a consumer's
// client credential narrowed to the topic (--topics orders, the
// least-privilege thing to do) wrote to it through the Kafka listener
// (PLAIN with the credential as the password, no capability involved),
// while a "*" credential could not: narrowing added write access. Now a
// credential minted without ops is consume only: kgo's Produce is
// refused TOPIC_AUTHORIZATION_FAILED, Kafka hands it no producer id,
// and the partition's log end offset in Kafka does not move. It still
// consumes: its group member reads the topic.
func TestConsumerCredentialCannotProduce(t *testing.T) {
	s := Start(t, Options{Partitions: 4})
	produceDirect(t, s, "orders", 2, 1)
	cred := mintCredential(t, s, "ktenant", []string{"orders"}, nil)
	if fmt.Sprint(cred.Ops) != "[consume]" {
		t.Fatalf("minted with ops %v, want [consume]", cred.Ops)
	}
	before := endOffset(t, s, "orders", 2)

	cl := kgoClient(t, s.KafkaAddrs(), cred.Credential, true, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite(),
		kgo.RecordRetries(1))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 2, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce with a consume-only credential naming the topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	probe := dialRaw(t, s.KafkaAddrs()[0])
	if resp := probe.authenticate("PLAIN", cred.Credential); resp.ErrorCode != 0 {
		t.Fatalf("authenticate: %d", resp.ErrorCode)
	}
	if code := probe.roundTrip(produceRecord("orders", 2, "x", 1000)).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("raw Produce with a consume-only credential: error %d, want TOPIC_AUTHORIZATION_FAILED", code)
	}
	if code := probe.roundTrip(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("InitProducerId with a consume-only credential: error %d, want CLUSTER_AUTHORIZATION_FAILED", code)
	}
	if after := endOffset(t, s, "orders", 2); after != before {
		t.Fatalf("orders/2 ended at %d before, %d after: a consume-only credential wrote", before, after)
	}

	consumer := kgoClient(t, s.KafkaAddrs(), cred.Credential, true, kgo.ConsumerGroup("producers"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID("ktenant-consumer"))
	if got := pollN(t, consumer, 1); got[0].Partition != 2 || got[0].Offset != 0 {
		t.Fatalf("the consume-only credential's member read %s/%d@%d", got[0].Topic, got[0].Partition, got[0].Offset)
	}
}

// TestProduceWithProduceOp: a kgo producer (idempotent, so
// InitProducerId goes through the listener too) writes through the
// listener with a client credential minted with ops consume and produce
// whose tps claim names the topic; the records are in Kafka as sent. A
// credential with produce whose topics reach the topic only by a
// pattern ("*") is refused: patterns grant consume only.
func TestProduceWithProduceOp(t *testing.T) {
	s := Start(t, Options{Partitions: 4})
	scoped := mintCredential(t, s, "writer", []string{"orders"}, []string{"consume", "produce"})
	if fmt.Sprint(scoped.Ops) != "[consume produce]" {
		t.Fatalf("minted with ops %v", scoped.Ops)
	}
	cl := kgoClient(t, s.KafkaAddrs(), scoped.Credential, true, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, v := range []string{"a", "b", "c"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 2, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce with a credential with produce naming the topic: %v", err)
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

	wide := mintCredential(t, s, "wide", []string{"*", "other"}, []string{"consume", "produce"})
	cl2 := kgoClient(t, s.KafkaAddrs(), wide.Credential, true, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite(),
		kgo.RecordRetries(1))
	err = cl2.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 2, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce with produce but the topic only under \"*\": %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if end := endOffset(t, s, "orders", 2); end != 3 {
		t.Fatalf("orders/2 ends at %d, want 3: only the scoped credential's records", end)
	}
}

// kafkajsProduce runs testdata/kafkajs/producer.js: one record to
// topic/partition over SASL PLAIN with token as the password. It returns
// KafkaJS's error type ("" when the record was sent) and the offset. env
// adds producer.js's optional settings (COMPRESSION=gzip, IDEMPOTENT=1,
// TRANSACTIONAL_ID=…).
func kafkajsProduce(t testing.TB, s *Stack, token, topic string, partition int32, env ...string) (errType string, offset int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "producer.js")
	cmd.Dir = kafkajsDir(t)
	cmd.Env = append(os.Environ(), "BROKERS="+strings.Join(s.KafkaAddrs(), ","), "CAPGATE_TOKEN="+token,
		"TOPIC="+topic, fmt.Sprint("PARTITION=", partition))
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node producer.js: %v\n%s", err, out)
	}
	var ev struct {
		Ev     string `json:"ev"`
		Type   string `json:"type"`
		Err    string `json:"err"`
		Offset int64  `json:"offset"`
	}
	if err := json.Unmarshal(out, &ev); err != nil {
		t.Fatalf("producer.js printed %q", out)
	}
	if ev.Ev == "sent" {
		return "", ev.Offset
	}
	t.Logf("KafkaJS: %s", ev.Err)
	return ev.Type, -1
}

// TestKafkaJSConsumerCredentialCannotProduce is redteam2 G as it was
// reproduced: KafkaJS's producer.send with a consumer's credential
// (--topics orders, no ops) as the PLAIN password. It is refused
// TOPIC_AUTHORIZATION_FAILED and nothing reaches Kafka; the same with a
// credential minted with consume,produce is written.
func TestKafkaJSConsumerCredentialCannotProduce(t *testing.T) {
	s := Start(t, Options{Partitions: 4})
	consumer := mintCredential(t, s, "ktenant", []string{"orders"}, nil)
	before := endOffset(t, s, "orders", 3)
	if errType, _ := kafkajsProduce(t, s, consumer.Credential, "orders", 3); errType != "TOPIC_AUTHORIZATION_FAILED" {
		t.Fatalf("KafkaJS produce with a consume-only credential: error type %q, want TOPIC_AUTHORIZATION_FAILED", errType)
	}
	if after := endOffset(t, s, "orders", 3); after != before {
		t.Fatalf("orders/3 ended at %d before, %d after: a consume-only credential wrote", before, after)
	}
	writer := mintCredential(t, s, "kwriter", []string{"orders"}, []string{"consume", "produce"})
	if errType, offset := kafkajsProduce(t, s, writer.Credential, "orders", 3); errType != "" || offset != before {
		t.Fatalf("KafkaJS produce with consume,produce: error type %q, offset %d; want written at %d", errType, offset, before)
	}
	if after := endOffset(t, s, "orders", 3); after != before+1 {
		t.Fatalf("orders/3 ends at %d, want %d", after, before+1)
	}
}
