package kafkaclients

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/gateway"
)

// TestKcatProduceOverTheCapIsRetried: librdkafka (kcat) producing while
// its capability is at max_inflight_fetches_per_holder. The gateway
// answered such a Produce THROTTLING_QUOTA_EXCEEDED, which kgo and the
// Java client retry but librdkafka takes for a permanent failure: kcat
// reported "Delivery failed" and the record was never written, though
// nothing was wrong but a moment's load. Now the refusal is an error
// every client retries as "not written" (NOT_ENOUGH_REPLICAS, with the
// 1 s throttle): kcat retries, and once the produce in flight is
// answered its record lands, once.
func TestKcatProduceOverTheCapIsRetried(t *testing.T) {
	s := Start(t, Options{Partitions: 2, Gateway: func(c *gateway.Config) { c.MaxInflightFetchesPerHolder = 1 }})
	grant := s.Grant(t, "orders", 1, []string{"fetch", "produce"}, time.Minute)
	held, release, _ := holdFirstProduce(s)
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	first := make(chan *kmsg.ProduceResponse, 1)
	go func() {
		r := dialRaw(t, s.KafkaAddrs()[0])
		if resp := r.authenticate("PLAIN", grant.Capability); resp.ErrorCode != 0 {
			t.Errorf("authenticate: %d", resp.ErrorCode)
			first <- nil
			return
		}
		first <- r.roundTrip(produceRecord("orders", 1, "held", 5000)).(*kmsg.ProduceResponse)
	}()
	select { // a produce answered without reaching Kafka must fail the test, not hang it
	case <-held:
	case resp := <-first:
		t.Fatalf("the first produce was answered before Kafka held it: %+v", resp)
	case <-time.After(30 * time.Second):
		t.Fatal("the first produce did not reach Kafka within 30 s")
	}

	sample := `capgate_gateway_requests_total{code="` + string(api.CodeTooManyFetches) + `",route="kafka_produce"} `
	refused := func() int {
		for _, line := range strings.Split(metrics(t, s), "\n") {
			if v, ok := strings.CutPrefix(line, sample); ok {
				n, _ := strconv.ParseFloat(v, 64)
				return int(n)
			}
		}
		return 0
	}
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := kcat(t, s, grant.Capability, "retried\n", "-P", "-t", "orders", "-p", "1")
		done <- result{out, err}
	}()
	sdk.Eventually(t, 20*time.Second, "kcat's produce refused at the cap", func() (bool, string) {
		select {
		case r := <-done:
			done <- r
			return true, "kcat ended"
		default:
		}
		n := refused()
		return n >= 1, strconv.Itoa(n) + " refused"
	})
	close(release)
	released = true
	if resp := <-first; resp == nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("the produce in flight: %+v, want written", resp)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("kcat -P over the in-flight cap: %v (librdkafka took the refusal as final)\n%s", r.err, r.out)
	}
	// What Kafka holds, read straight from it: kcat's record, and two
	// records in all (the held one, answered written, and kcat's once).
	direct, err := kgo.NewClient(kgo.SeedBrokers(s.Kafka.Addrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {1: kgo.NewOffset().At(1)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	got := string(pollN(t, direct, 1)[0].Value)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(direct).ListEndOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup("orders", 1)
	if got != "retried" || end.Offset != 2 {
		t.Fatalf("partition 1: %q at offset 1, end offset %d; want kcat's record, once (end 2)", got, end.Offset)
	}
}

// TestKcatProduceOverTheRateIsRetried: librdkafka (kcat) producing
// faster than an operator's byte rate on the topic (PUT /v1/admin/qos).
// A Produce over the rate was answered THROTTLING_QUOTA_EXCEEDED, final to
// librdkafka: the records beyond the rate were dropped. Now they are
// answered NOT_ENOUGH_REPLICAS, throttled until the rate allows them, and
// every record lands, once.
func TestKcatProduceOverTheRateIsRetried(t *testing.T) {
	s := Start(t, Options{Partitions: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	limit := int64(400)
	if status, raw := s.Admin(t, http.MethodPut, "/v1/admin/qos", coordinator.QoSRequest{
		Selector: api.QoSSelector{Topic: "orders"}, MaxBytesPerSec: &limit, TTLMs: 600_000,
	}, nil); status != http.StatusOK {
		t.Fatalf("qos: %d %s", status, raw)
	}
	seq, err := s.SyncSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sdk.Eventually(t, 20*time.Second, "the gateway to apply the byte rate", func() (bool, string) {
		ok, why, err := s.Acked(ctx, seq)
		if err != nil {
			return false, err.Error()
		}
		return ok, why
	})
	grant := s.Grant(t, "orders", 1, []string{"produce"}, time.Minute)
	// Each run's records are one batch, admitted while the rate has
	// any allowance left; the first run's 900 B put the holder 500 B in
	// debt, so the second run's batch is refused until it is repaid.
	const n = 3
	for run := range 2 {
		var in strings.Builder
		for i := range n {
			fmt.Fprintf(&in, "%d-%d-%s\n", run, i, strings.Repeat("r", 300))
		}
		if out, err := kcat(t, s, grant.Capability, in.String(), "-P", "-t", "orders", "-p", "1"); err != nil {
			t.Fatalf("kcat -P run %d over the byte rate: %v (librdkafka took the refusal as final)\n%s", run, err, out)
		}
	}
	sample := `capgate_gateway_requests_total{code="` + string(api.CodeRateLimited) + `",route="kafka_produce"} `
	if m := metrics(t, s); !strings.Contains(m, sample) || strings.Contains(m, sample+"0\n") {
		t.Fatal("no produce was refused over the rate: the test did not reach the path it tests")
	}
	direct, err := kgo.NewClient(kgo.SeedBrokers(s.Kafka.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	ends, err := kadm.NewClient(direct).ListEndOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if end, _ := ends.Lookup("orders", 1); end.Offset != 2*n {
		t.Fatalf("partition 1 ends at %d, want %d: every record kcat produced, once", end.Offset, 2*n)
	}
}
