package kafkaclients

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestKgoCompressionCodecsThroughTheListener: a kgo producer writes
// through the listener with each compression codec Kafka knows (gzip,
// snappy, lz4, zstd; idempotent, kgo's default: a producer id from
// InitProducerId through the listener), the batches are stored in Kafka
// with that codec and a producer id, and a kgo consumer through the
// listener reads every record back as written.
func TestKgoCompressionCodecsThroughTheListener(t *testing.T) {
	s := Start(t, Options{Partitions: 4})
	cred := mintCredential(t, s, "codecs", []string{s.Topic}, []string{"consume", "produce"}).Credential
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
		id    uint8
	}{{"gzip", kgo.GzipCompression(), 1}, {"snappy", kgo.SnappyCompression(), 2}, {"lz4", kgo.Lz4Compression(), 3}, {"zstd", kgo.ZstdCompression(), 4}}
	const n = 20
	for i, c := range codecs {
		p := int32(i)
		cl := kgoClient(t, s.KafkaAddrs(), cred, true, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(c.codec))
		var rs []*kgo.Record
		for j := range n {
			rs = append(rs, &kgo.Record{Topic: s.Topic, Partition: p, Value: []byte(fmt.Sprintf("%s-%03d-%s", c.name, j, "compressible compressible compressible"))})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("%s: produce through the listener: %v", c.name, err)
		}
		stored := storedCodecs(t, s, p, n)
		for j, got := range stored {
			if got != c.id {
				t.Errorf("%s: record %d stored with codec %d", c.name, j, got)
			}
		}
	}
	// The producer ids: idempotent writes through the listener.
	direct, err := kgo.NewClient(kgo.SeedBrokers(s.Kafka.Addrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.Topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	for _, r := range pollN(t, direct, 1) {
		if r.ProducerID < 0 {
			t.Errorf("stored without a producer id (%d): not idempotent", r.ProducerID)
		}
	}
	reader := kgoClient(t, s.KafkaAddrs(), cred, false, kgo.ConsumeTopics(s.Topic), kgo.ConsumerGroup("producers"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]bool{}
	deadline := time.Now().Add(45 * time.Second)
	for len(got) < n*len(codecs) && time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		fs := reader.PollFetches(pctx)
		pcancel()
		fs.EachError(func(topic string, p int32, err error) {
			if pctx.Err() == nil {
				t.Logf("fetch %s/%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	for _, c := range codecs {
		for j := range n {
			if v := fmt.Sprintf("%s-%03d-%s", c.name, j, "compressible compressible compressible"); !got[v] {
				t.Errorf("%s record %d not read back through the listener", c.name, j)
			}
		}
	}
}

// TestKgoTransactionsRefused: the listener serves no transactions (no
// AddPartitionsToTxn, EndTxn, …); a transactional kgo producer is told
// so at once — its InitProducerId with a transactional id is answered
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which kgo reports from
// BeginTransaction as fatal — never a hang, and nothing reaches Kafka;
// the gateway logs it once at warn.
func TestKgoTransactionsRefused(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	s := Start(t, Options{Partitions: 2, Observe: core})
	cred := mintCredential(t, s, "tx", []string{s.Topic}, []string{"consume", "produce"}).Credential
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := kgoClient(t, s.KafkaAddrs(), cred, true, kgo.TransactionalID("tx-1"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	start := time.Now()
	err := cl.BeginTransaction()
	if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("BeginTransaction through the listener: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: s.Topic, Partition: 0, Value: []byte("tx")}).FirstErr(); err == nil {
		t.Fatal("a transactional record was produced after the refusal")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("refused after %v: not at once", d)
	}
	if end := endOffset(t, s, s.Topic, 0); end != 0 {
		t.Errorf("%s/0 ends at %d in Kafka, want 0", s.Topic, end)
	}
	if n := logs.FilterMessageSnippet("kafka transactional producer refused").Len(); n != 1 {
		t.Errorf("the refused transaction logged %d times, want once", n)
	}
}

// TestKcatFirstSteps: what a user runs first with kcat (librdkafka) and a
// client credential over SASL PLAIN: -L lists the topic; -P writes with
// each codec (-z none, gzip, snappy, lz4, zstd); -G
// reads them back as a group member; -C of a partition outside a group
// is refused TOPIC_AUTHORIZATION_FAILED — a client credential reads only
// as a group member — and the gateway says so at warn, naming the topic
// and what to use (kcat -G, or a partition capability). Before, the
// refusal was said nowhere but in kcat's "Topic authorization failed",
// which reads as a missing ACL.
func TestKcatFirstSteps(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	s := Start(t, Options{Partitions: 2, Observe: core})
	cred := mintCredential(t, s, "kcat", []string{s.Topic}, []string{"consume", "produce"}).Credential
	out, err := kcat(t, s, cred, "", "-L")
	if err != nil || !strings.Contains(out, `topic "`+s.Topic+`" with 2 partitions`) {
		t.Fatalf("kcat -L: %v\n%s", err, out)
	}
	codecs := []string{"none", "gzip", "snappy", "lz4", "zstd"}
	for _, z := range codecs {
		pad := strings.Repeat("x", 2000) // librdkafka sends a batch compression does not shrink uncompressed
		if out, err := kcat(t, s, cred, z+"-a"+pad+"\n"+z+"-b"+pad+"\n", "-P", "-t", s.Topic, "-p", "0", "-z", z); err != nil {
			t.Fatalf("kcat -P -z %s: %v\n%s", z, err, out)
		}
	}
	// (librdkafka against kfake stores gzip, snappy and lz4 batches this
	// small uncompressed straight to Kafka too; the codecs themselves are
	// TestKgoCompressionCodecsThroughTheListener's.)
	out, err = kcat(t, s, cred, "", "-G", "producers", "-o", "beginning", "-e", "-f", "%s\n", s.Topic)
	for _, z := range codecs {
		if !strings.Contains(out, z+"-a") || !strings.Contains(out, z+"-b") { // kcat's stderr may cut into a value's line
			t.Errorf("kcat -G did not read the %s records: %v\n%s", z, err, out)
		}
	}
	out, err = kcat(t, s, cred, "", "-C", "-t", s.Topic, "-p", "0", "-o", "beginning", "-e")
	if err == nil || !strings.Contains(out, "Topic authorization failed") {
		t.Errorf("kcat -C -p 0 with a client credential: %v, want Topic authorization failed\n%s", err, out)
	}
	said := logs.FilterMessageSnippet("kafka fetch with a client credential reaching no consumer group member").All()
	if len(said) == 0 || said[0].ContextMap()["topic"] != s.Topic || !strings.Contains(said[0].Message, "kcat -G") {
		t.Errorf("the refused fetch outside a group not logged: %v", said)
	}
	if _, err := kcat(t, s, cred, "", "-C", "-t", s.Topic, "-p", "0", "-o", "beginning", "-e"); err == nil {
		t.Error("the second kcat -C was not refused")
	}
	if n := logs.FilterMessageSnippet("kafka fetch with a client credential reaching no consumer group member").Len(); n != 1 {
		t.Errorf("logged %d times for one client and topic, want once", n)
	}
}

// TestKafkaJSProducerSettings: KafkaJS's producer through the listener
// with a credential that may write: gzip (its one built-in codec) is
// stored gzip, an idempotent producer (InitProducerId) writes with a
// producer id, and a transactional one is refused at once — nothing
// written. KafkaJS reports the refusal (FindCoordinator of its
// transaction coordinator: TRANSACTIONAL_ID_AUTHORIZATION_FAILED) only
// as "Failed to find group coordinator" (KafkaJSGroupCoordinatorNotFound:
// it tries each broker and forgets why), so the gateway logs it at warn
// saying transactions are not served and what to do instead; before, it
// said nothing.
func TestKafkaJSProducerSettings(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	s := Start(t, Options{Partitions: 3, Observe: core})
	cred := mintCredential(t, s, "kjs-writer", []string{s.Topic}, []string{"consume", "produce"}).Credential
	if errType, offset := kafkajsProduce(t, s, cred, s.Topic, 0, "COMPRESSION=gzip"); errType != "" || offset != 0 {
		t.Fatalf("KafkaJS gzip produce: %q at %d", errType, offset)
	}
	if got := storedCodecs(t, s, 0, 1); got[0] != 1 {
		t.Errorf("KafkaJS's gzip batch stored with codec %d, want 1", got[0])
	}
	if errType, offset := kafkajsProduce(t, s, cred, s.Topic, 1, "IDEMPOTENT=1"); errType != "" || offset != 0 {
		t.Fatalf("KafkaJS idempotent produce: %q at %d", errType, offset)
	}
	direct, err := kgo.NewClient(kgo.SeedBrokers(s.Kafka.Addrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.Topic: {1: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if r := pollN(t, direct, 1)[0]; r.ProducerID < 0 {
		t.Errorf("KafkaJS's idempotent record stored without a producer id (%d)", r.ProducerID)
	}
	start := time.Now()
	if errType, _ := kafkajsProduce(t, s, cred, s.Topic, 2, "TRANSACTIONAL_ID=kjs-tx"); errType != "KafkaJSGroupCoordinatorNotFound" {
		t.Errorf("KafkaJS transaction through the listener: %q, want KafkaJSGroupCoordinatorNotFound (KafkaJS's report of the refusal)", errType)
	}
	said := logs.FilterMessageSnippet("kafka transactional producer refused").All()
	if len(said) != 1 || said[0].ContextMap()["transactional_id"] != "kjs-tx" {
		t.Errorf("the refused transaction logged %d times (%v), want once naming kjs-tx", len(said), said)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the transaction refused after %v: not at once", d)
	}
	if end := endOffset(t, s, s.Topic, 2); end != 0 {
		t.Errorf("%s/2 ends at %d in Kafka after the refused transaction, want 0", s.Topic, end)
	}
}
