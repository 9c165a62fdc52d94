package kafkaclients

import (
	"context"
	"fmt"
	"hash/crc32"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/gateway"
)

// TestRevocationAckWaitsForKafkaProduce is the race of a producer whose
// capability is revoked while its Produce, admitted before, is on its
// way to Kafka (held there by kfake): the gateway acknowledged the
// revocation while the write was still to land, so "every gateway
// acknowledged" did not mean "nothing more is written under it". Now the
// listener's Produce is registered in flight like a fetch: the gateway
// finds it among the revocation's victims and acknowledges only once
// Kafka answered; the write is not cancelled (a write cancelled on its
// way could still land, unseen) and the producer gets Kafka's answer.
func TestRevocationAckWaitsForKafkaProduce(t *testing.T) {
	s := Start(t, Options{Partitions: 2})
	grant := s.Grant(t, "orders", 1, []string{"fetch", "produce"}, time.Minute)
	held, release := make(chan struct{}), make(chan struct{})
	var holding atomic.Bool
	cluster := s.Kafka.Cluster()
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if holding.CompareAndSwap(false, true) { // the only Produce of the test (by topic id from v13)
			close(held)
			cluster.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	cl := kgoClient(t, s.KafkaAddrs(), grant.Capability, true, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite())
	produced := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		produced <- cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 1, Value: []byte("in flight")}).FirstErr()
	}()
	select {
	case <-held:
	case err := <-produced:
		t.Fatalf("the produce was answered before Kafka saw it: %v", err)
	}
	cancelled := func() float64 { return grepCount(metrics(t, s), "capgate_gateway_fetches_cancelled_total") }
	before := cancelled()

	s.Deny(t, grant.JTI)
	var gws coordinator.GatewaysResponse
	if status, raw := s.Admin(t, http.MethodGet, "/v1/admin/gateways", nil, &gws); status != http.StatusOK {
		t.Fatalf("gateways: %d %s", status, raw)
	}
	denial := gws.Seq
	acked := func() (uint64, string) {
		var now coordinator.GatewaysResponse
		if status, raw := s.Admin(t, http.MethodGet, "/v1/admin/gateways", nil, &now); status != http.StatusOK || len(now.Gateways) != 1 {
			t.Fatalf("gateways: %d %s", status, raw)
		}
		return now.Gateways[0].Acked, fmt.Sprintf("acked %d of %d", now.Gateways[0].Acked, denial)
	}
	// Either the gateway acknowledged the denial (the produce was not in
	// flight for it) or it found the produce among the revocation's
	// victims, and then it waits for Kafka's answer before acknowledging.
	sdk.Eventually(t, 20*time.Second, "the gateway acknowledging the denial or waiting for the produce", func() (bool, string) {
		n, why := acked()
		return n >= denial || cancelled() > before, why
	})
	if n, _ := acked(); n >= denial {
		t.Fatalf("the gateway acknowledged the denial (seq %d) while a produce admitted under the capability was on its way to Kafka", denial)
	}
	close(release)
	if err := <-produced; err != nil {
		t.Fatalf("the produce Kafka answered after the revocation: %v, want Kafka's answer (written)", err)
	}
	sdk.Eventually(t, 20*time.Second, "the denial acknowledged once Kafka answered", func() (bool, string) {
		n, why := acked()
		return n >= denial, why
	})
}

// TestKafkaProduceCountsAgainstTheCaps: a produce in flight counts
// against max_inflight_fetches_per_holder like a fetch (1 here): while
// one Produce of a capability waits for Kafka, the same capability's
// next Produce, on another connection, is refused before it reaches
// Kafka with NOT_ENOUGH_REPLICAS (retried by every client as "not
// written") and a 1 s throttle.
func TestKafkaProduceCountsAgainstTheCaps(t *testing.T) {
	s := Start(t, Options{Partitions: 2, Gateway: func(c *gateway.Config) { c.MaxInflightFetchesPerHolder = 1 }})
	grant := s.Grant(t, "orders", 1, []string{"produce"}, time.Minute)
	held, release, produces := holdFirstProduce(s)
	produce := func() *kmsg.ProduceResponse {
		r := dialRaw(t, s.KafkaAddrs()[0])
		if resp := r.authenticate("PLAIN", grant.Capability); resp.ErrorCode != 0 {
			t.Fatalf("authenticate: %d", resp.ErrorCode)
		}
		return r.roundTrip(produceRecord("orders", 1, "x", 5000)).(*kmsg.ProduceResponse)
	}
	first := make(chan *kmsg.ProduceResponse, 1)
	go func() { first <- produce() }()
	<-held
	second := produce()
	if code := second.Topics[0].Partitions[0].ErrorCode; code != kerr.NotEnoughReplicas.Code || second.ThrottleMillis != 1000 {
		t.Fatalf("a second produce of a holder at its cap: error %d, throttle %d ms; want NOT_ENOUGH_REPLICAS, 1000 ms", code, second.ThrottleMillis)
	}
	close(release)
	if code := (<-first).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("the produce in flight: error %d, want written", code)
	}
	if n := produces.Load(); n != 1 {
		t.Fatalf("Kafka got %d Produce requests, want 1 (the refused one never sent)", n)
	}
	if code := produce().Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("a produce once the first was answered: error %d, want written", code)
	}
}

// holdFirstProduce makes Kafka hold the first Produce it gets until
// release is closed (held is closed once it arrived); later ones pass.
// produces counts the Produce requests Kafka got.
func holdFirstProduce(s *Stack) (held, release chan struct{}, produces *atomic.Int64) {
	held, release, produces = make(chan struct{}), make(chan struct{}), new(atomic.Int64)
	cluster := s.Kafka.Cluster()
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if produces.Add(1) == 1 {
			close(held)
			cluster.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	return held, release, produces
}

// recordBatch is one uncompressed record batch holding value.
func recordBatch(value string) []byte {
	rec := kmsg.NewRecord()
	rec.Value = []byte(value)
	b := kmsg.NewRecordBatch()
	b.Magic, b.NumRecords, b.LastOffsetDelta = 2, 1, 0
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = -1, -1, -1
	b.Records = rec.AppendTo(nil)
	raw := b.AppendTo(nil)
	b.Length = int32(len(raw) - 12)
	b.CRC = int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b.AppendTo(nil)
}
