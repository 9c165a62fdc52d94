package kafkaclients

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/gateway"
)

// storedCodecs reads partition p of the stack's topic straight from Kafka
// (n records from offset 0) and returns the compression codec of the
// record batch each record came in (kgo.RecordAttrs.CompressionType: the
// batch attributes' bits 0-2; 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
func storedCodecs(t testing.TB, s *Stack, p int32, n int) []uint8 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Kafka.Addrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.Topic: {p: kgo.NewOffset().At(0)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []uint8
	for _, r := range pollN(t, cl, n) {
		out = append(out, r.Attrs.CompressionType())
	}
	return out
}

// TestGatewayProduceReadByKafkaJS: records written through the gateway's
// HTTP produce (client.Producer, as capgate produce writes them: one
// request of many records) are stored uncompressed by default and gzip
// with broker.produce_compression: gzip, and KafkaJS — which has no
// snappy codec — reads them through the listener. Before, the gateway's
// kgo producer wrote snappy (kgo's default) and KafkaJS crashed
// ("Snappy compression not implemented").
func TestGatewayProduceReadByKafkaJS(t *testing.T) {
	for _, tc := range []struct {
		codec string
		want  uint8
	}{{"", 0}, {"gzip", 1}} {
		t.Run(cmp.Or(tc.codec, "default"), func(t *testing.T) {
			s := Start(t, Options{Partitions: 2, Gateway: func(cfg *gateway.Config) {
				if tc.codec != "" {
					cfg.Broker.ProduceCompression = tc.codec
				}
			}})
			const n = 20
			grant := s.Grant(t, s.Topic, 1, []string{"produce"}, time.Minute)
			producer, err := client.NewProducer(s.GatewayURLs(), grant.Capability)
			if err != nil {
				t.Fatal(err)
			}
			recs := make([]client.Record, n)
			for i := range recs {
				recs[i] = client.Record{Value: []byte(fmt.Sprintf("record %d %s", i, strings.Repeat("x", 200)))} // compressible
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := producer.Produce(ctx, s.Topic, 1, recs); err != nil {
				t.Fatal(err)
			}
			for i, got := range storedCodecs(t, s, 1, n) {
				if got != tc.want {
					t.Fatalf("record %d stored in a batch of codec %d, want %d", i, got, tc.want)
				}
			}

			group := "js-produced"
			js := startKafkaJS(t, s, group, group, s.ClientCredential(t, group))
			sdk.Eventually(t, 60*time.Second, "KafkaJS read every produced record", func() (bool, string) {
				read := 0
				for _, e := range js.Events() {
					switch {
					case e.Ev == "crash":
						t.Fatalf("KafkaJS crashed on records the gateway wrote: %s", e.Err)
					case e.Ev == "record" && e.Partition == 1:
						read++
					}
				}
				return read == n, fmt.Sprintf("%d of %d read", read, n)
			})
		})
	}
}
