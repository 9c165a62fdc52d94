package gateway

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/gateway/kafkaproto"
)

// TestKafkaListenerFetchesCountAgainstTheCaps is the attack of one
// capability long-polling through the Kafka listener on connection
// after connection: each long poll holds one of the gateway's broker
// long-poll connections, and the listener registered them without the
// in-flight caps the HTTP routes answer 429 and 503 under, so one holder
// could take them all. Now a holder at max_inflight_fetches_per_holder
// (2 here) gets its next partition answered empty and throttled, and
// never has a third fetch in flight.
func TestKafkaListenerFetchesCountAgainstTheCaps(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{edit: func(c *Config) {
		c.KafkaListen, c.KafkaFetchLanes = "127.0.0.1:0", 1
		c.MaxInflightFetchesPerHolder = 2
	}})
	h.waitReady()
	token, _ := h.mint(capClaims(0))
	sample := `capgate_gateway_requests_total{code="` + string(api.CodeTooManyFetches) + `",route="` + kafkaproto.OpFetch + `"} `
	refused := func() float64 {
		for _, line := range strings.Split(string(h.get("", "/metrics").body), "\n") {
			if v, ok := strings.CutPrefix(line, sample); ok {
				n, _ := strconv.ParseFloat(v, 64)
				return n
			}
		}
		return 0
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Each consumer has its own connection and long-polls partition 0,
	// which has no records: its fetch stays in flight at the broker.
	poll := func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(h.gw.KafkaAddr()),
			kgo.SASL(plain.Auth{User: "capgate", Pass: token}.AsMechanism()),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{testTopic: {0: kgo.NewOffset().AtStart()}}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		go func() {
			for ctx.Err() == nil {
				cl.PollFetches(ctx)
			}
		}()
	}
	poll()
	poll()
	waitFor(t, "two long polls in flight", func() bool { return h.gw.inflight.count() == 2 })
	poll()
	waitFor(t, "the third holder's fetch refused", func() bool { return refused() >= 1 })
	if n := h.gw.inflight.count(); n > 2 {
		t.Fatalf("%d fetches of one holder in flight, cap 2", n)
	}
}
