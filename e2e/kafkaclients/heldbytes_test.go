package kafkaclients

import (
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/gateway"
)

// TestSlowKafkaReaderHoldsBoundedBytes is the HTTP routes' slow-reader
// attack on the Kafka listener: a holder fetching 8 MiB answers on
// connections it never reads made the gateway hold each answer until
// write_timeout. The answer bytes are now counted against
// max_answer_bytes_held_per_holder (8 MiB here): while one unread answer
// holds them, the holder's next fetch is answered without records and
// throttled (before: another 8 MiB answer).
func TestSlowKafkaReaderHoldsBoundedBytes(t *testing.T) {
	s := Start(t, Options{Partitions: 1, Gateway: func(c *gateway.Config) {
		c.MaxAnswerBytesHeldPerHolder = int64(c.MaxFetchBytes)
		c.WriteTimeout = time.Minute // the attacker's connection, not the clock, ends the hold
	}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Kafka.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	value := make([]byte, 512<<10) // random: the producer compresses
	for range 20 {
		rand.Read(value)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: value}).FirstErr()
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	grant := s.Grant(t, "orders", 0, []string{"fetch"}, time.Minute)
	big := func() *kmsg.FetchRequest {
		req := fetchOne("orders", 0, 0, 0)
		req.MaxBytes, req.Topics[0].Partitions[0].PartitionMaxBytes = 8<<20, 8<<20
		return req
	}
	// The slow reader: a tiny receive window, its answer never read.
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	nc, err := d.Dial("tcp", s.KafkaAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	slow := &rawConn{t: t, nc: nc, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("slow"))}
	if resp := slow.authenticate("PLAIN", grant.Capability); resp.ErrorCode != 0 {
		t.Fatalf("authenticate: %d", resp.ErrorCode)
	}
	slow.send(big())
	held := func() float64 {
		resp, err := http.Get(s.GatewayURLs()[0] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, "capgate_gateway_answer_bytes_held "); ok {
				n, _ := strconv.ParseFloat(v, 64)
				return n
			}
		}
		return 0
	}
	sdk.Eventually(t, 10*time.Second, "the unread answer held", func() (bool, string) {
		n := held()
		return n >= 4<<20, strconv.FormatFloat(n, 'f', 0, 64)
	})
	probe := dialRaw(t, s.KafkaAddrs()[0])
	if resp := probe.authenticate("PLAIN", grant.Capability); resp.ErrorCode != 0 {
		t.Fatalf("authenticate: %d", resp.ErrorCode)
	}
	resp := probe.roundTrip(big()).(*kmsg.FetchResponse)
	if n := len(resp.Topics[0].Partitions[0].RecordBatches); n != 0 || resp.ThrottleMillis < 1000 {
		t.Fatalf("the holder's second fetch while its first answer is unread: %d bytes of records, throttle %d ms; want none, throttled", n, resp.ThrottleMillis)
	}
	nc.Close()
	sdk.Eventually(t, 30*time.Second, "the held bytes given back", func() (bool, string) {
		n := held()
		return n == 0, strconv.FormatFloat(n, 'f', 0, 64)
	})
	resp = probe.roundTrip(big()).(*kmsg.FetchResponse)
	if n := len(resp.Topics[0].Partitions[0].RecordBatches); n < 4<<20 {
		t.Fatalf("after the slow reader left: %d bytes of records", n)
	}
}
