package kafkaclients

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
)

// idpOpsConfig trusts is with three rules: kafka-writers may produce to
// orders (ops consume, produce); kafka-billing reads orders and payments,
// both named exactly, without ops (consume only); kafka-readers reads
// "*".
func idpOpsConfig(is *idptest.Issuer) identity.Config {
	cfg := identity.DefaultConfig()
	cfg.Issuers = []identity.IssuerConfig{{
		Issuer: is.URL, CAFile: is.CAFile, Audiences: []string{"capgate"},
		Rules: []identity.Rule{
			{Claim: "groups", Value: "kafka-writers", Groups: []string{"billing-*"}, Topics: []string{"orders"}, Ops: []string{"consume", "produce"}},
			{Claim: "groups", Value: "kafka-billing", Groups: []string{"billing-*"}, Topics: []string{"orders", "payments"}},
			{Claim: "groups", Value: "kafka-readers", Groups: []string{"billing-*"}, Topics: []string{"*"}, Ops: []string{"consume"}},
		},
	}}
	return cfg
}

// TestIdPRuleOpsProduce: through the Kafka listener, with kgo and IdP
// tokens as the SASL bearer, an IdP identity writes only as its rules'
// ops allow. A token matching the produce rule on orders (and the
// consume rules naming payments exactly and "*") writes to orders with
// an idempotent producer over OAUTHBEARER — Kafka's end offset moves by
// its records — and is refused TOPIC_AUTHORIZATION_FAILED on payments,
// which only a consume rule names. A token matching no produce rule,
// although its rule names orders exactly (what let an IdP token write
// before rules had ops), is refused over PLAIN, gets no producer id, and
// nothing reaches Kafka.
func TestIdPRuleOpsProduce(t *testing.T) {
	idp := idptest.New(t, "ES256")
	s := Start(t, Options{Partitions: 4, OIDC: idpOpsConfig(idp)})
	createTopic(t, s, "payments")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	writer := idp.Token(idpClaims("svc-orders", map[string]any{"groups": []string{"kafka-writers", "kafka-billing", "kafka-readers"}}))
	ordersBefore, paymentsBefore := endOffset(t, s, "orders", 1), endOffset(t, s, "payments", 0)
	cl := kgoClient(t, s.KafkaAddrs(), writer, false, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, v := range []string{"a", "b"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 1, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce to orders with an IdP identity whose rule grants produce on orders: %v", err)
		}
	}
	if after := endOffset(t, s, "orders", 1); after != ordersBefore+2 {
		t.Fatalf("orders/1 ends at %d, want %d: the writer's two records", after, ordersBefore+2)
	}
	refused := kgoClient(t, s.KafkaAddrs(), writer, false, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite(),
		kgo.RecordRetries(1))
	err := refused.ProduceSync(ctx, &kgo.Record{Topic: "payments", Partition: 0, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("produce to payments, named only by a consume rule of the writer: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if after := endOffset(t, s, "payments", 0); after != paymentsBefore {
		t.Errorf("payments/0 ended at %d before, %d after: written without a produce rule", paymentsBefore, after)
	}

	reader := idp.Token(idpClaims("svc-billing", nil)) // kafka-billing: orders named exactly, no ops
	ordersBefore = endOffset(t, s, "orders", 1)
	rc := kgoClient(t, s.KafkaAddrs(), reader, true, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite(),
		kgo.RecordRetries(1))
	err = rc.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 1, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce with an IdP identity without a produce rule: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	probe := dialRaw(t, s.KafkaAddrs()[0])
	if resp := probe.authenticate("PLAIN", reader); resp.ErrorCode != 0 {
		t.Fatalf("authenticate: %d", resp.ErrorCode)
	}
	if code := probe.roundTrip(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("InitProducerId with an IdP identity without a produce rule: error %d, want CLUSTER_AUTHORIZATION_FAILED", code)
	}
	if after := endOffset(t, s, "orders", 1); after != ordersBefore {
		t.Fatalf("orders/1 ended at %d before, %d after: an identity without a produce rule wrote", ordersBefore, after)
	}
}

// createTopic creates topic (2 partitions) in Kafka itself.
func createTopic(t testing.TB, s *Stack, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(directClient(t, s)).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
}

// directClient is a client of Kafka itself (not through a gateway),
// closed when the test ends.
func directClient(t testing.TB, s *Stack) *kgo.Client {
	t.Helper()
	direct, err := kgo.NewClient(kgo.SeedBrokers(s.Kafka.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(direct.Close)
	return direct
}

// TestIdPProduceRuleCannotWriteInternalTopics: a rule granting produce on
// a topic Kafka keeps for itself (__consumer_offsets: every group's
// committed offsets) or the coordinator's state topics does not make
// them writable: the listener admits no client principal's Produce to a
// topic it hides from every client (Metadata, ListOffsets), an IdP
// identity's; TOPIC_AUTHORIZATION_FAILED and nothing written. A client
// credential naming such a topic is not even minted (403 forbidden at
// POST /v1/admin/clients, since 1b7ac14).
func TestIdPProduceRuleCannotWriteInternalTopics(t *testing.T) {
	idp := idptest.New(t, "ES256")
	cfg := identity.DefaultConfig()
	cfg.Issuers = []identity.IssuerConfig{{Issuer: idp.URL, CAFile: idp.CAFile, Audiences: []string{"capgate"},
		Rules: []identity.Rule{{Claim: "groups", Value: "kafka-billing", Groups: []string{"billing-*"},
			Topics: []string{"__consumer_offsets"}, Ops: []string{"consume", "produce"}}}}}
	s := Start(t, Options{Topic: "__consumer_offsets", Partitions: 1, OIDC: cfg})
	req := coordinator.ClientRequest{Name: "internal-writer", Groups: []string{"producers"}, Topics: []string{"__consumer_offsets"},
		Ops: []string{"consume", "produce"}, TTLMs: time.Hour.Milliseconds()}
	if status, raw := s.Admin(t, http.MethodPost, "/v1/admin/clients", req, nil); status != http.StatusForbidden {
		t.Fatalf("a client credential naming __consumer_offsets: %d %s, want 403", status, raw)
	}
	before := endOffset(t, s, "__consumer_offsets", 0)
	for name, token := range map[string]string{"IdP identity": idp.Token(idpClaims("svc-billing", nil))} {
		probe := dialRaw(t, s.KafkaAddrs()[0])
		if resp := probe.authenticate("PLAIN", token); resp.ErrorCode != 0 {
			t.Fatalf("%s: authenticate: %d", name, resp.ErrorCode)
		}
		if code := probe.roundTrip(produceRecord("__consumer_offsets", 0, "x", 1000)).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
			t.Errorf("%s with produce on __consumer_offsets: Produce error %d, want TOPIC_AUTHORIZATION_FAILED", name, code)
		}
	}
	if after := endOffset(t, s, "__consumer_offsets", 0); after != before {
		t.Fatalf("__consumer_offsets/0 ended at %d before, %d after: written through the listener", before, after)
	}
}
