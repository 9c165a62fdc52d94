package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
)

// TestProduceTopicPlacesAsKafka: a credential producer writes to a topic
// without choosing partitions (ProduceTopic, the gateway's topic route);
// a consumer joined with the same credential reads each keyed record on
// the partition franz-go's default partitioner (Kafka's murmur2) gives
// its key — an empty key included —, the keyless ones all on one
// partition (Kafka's sticky partitioner: the call is the batch), and the returned partitions hold the counts and offsets
// where the records are.
func TestProduceTopicPlacesAsKafka(t *testing.T) {
	s := startStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cred := credential(t, s, []string{"orders"}, []string{"consume", "produce"}).Credential
	p, err := client.NewCredentialProducer(s.GatewayURLs(), cred)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	kafka := kgo.StickyKeyPartitioner(nil).ForTopic("orders")
	want := map[string]int32{}
	var recs []client.Record
	for i := range 20 {
		key := fmt.Sprintf("customer-%d", i)
		recs = append(recs, client.Record{Key: []byte(key), Value: []byte(key)})
		want[key] = int32(kafka.Partition(&kgo.Record{Key: []byte(key)}, 4))
	}
	recs = append(recs, client.Record{Key: []byte{}, Value: []byte("empty-key")})
	want["empty-key"] = int32(kafka.Partition(&kgo.Record{Key: []byte{}}, 4))
	for i := range 4 {
		recs = append(recs, client.Record{Value: fmt.Appendf(nil, "keyless-%d", i)})
	}
	written, err := p.ProduceTopic(ctx, "orders", recs)
	if err != nil {
		t.Fatal(err)
	}

	byPartition := map[int32][]client.Record{}
	keyless := map[int32]int{}
	for _, r := range readOrders(ctx, t, s, cred, len(recs)) {
		byPartition[r.Partition] = append(byPartition[r.Partition], r)
		if r.Key == nil {
			keyless[r.Partition]++
		} else if part := want[string(r.Value)]; r.Partition != part {
			t.Errorf("%q read on orders/%d, Kafka puts its key on orders/%d", r.Value, r.Partition, part)
		}
	}
	if len(keyless) != 1 {
		t.Errorf("keyless records by partition %v, want all on one", keyless)
	}
	if len(written) != len(byPartition) {
		t.Fatalf("ProduceTopic returned %+v; records are on %d partitions", written, len(byPartition))
	}
	for _, w := range written {
		got := byPartition[w.Partition]
		if len(got) != w.Count || got[0].Offset != w.BaseOffset || got[len(got)-1].Offset != w.LastOffset {
			t.Errorf("returned %+v; orders/%d holds %d records", w, w.Partition, len(got))
		}
	}
}

// TestProduceTopicRefusals: ProduceTopic with a consume-only credential,
// one for another topic, and a capability returns the documented codes.
func TestProduceTopicRefusals(t *testing.T) {
	s := startStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var capability struct {
		Capability string `json:"capability"`
	}
	if err := s.MustAdmin(ctx, http.MethodPost, "/v1/admin/capabilities",
		map[string]any{"topic": "orders", "partition": 0, "ops": []string{"produce"}, "ttl_ms": 60000, "holder": "h"}, &capability); err != nil {
		t.Fatal(err)
	}
	rec := []client.Record{{Key: []byte("k"), Value: []byte("v")}}
	for _, tc := range []struct {
		name  string
		token string
		code  api.Code
	}{
		{"consume-only credential", credential(t, s, []string{"orders"}, []string{"consume"}).Credential, api.CodeForbidden},
		{"credential for another topic", credential(t, s, []string{"payments"}, []string{"consume", "produce"}).Credential, api.CodeForbidden},
		{"capability", capability.Capability, api.CodeForbidden},
	} {
		p, err := client.NewCredentialProducer(s.GatewayURLs(), tc.token)
		if err != nil {
			t.Fatal(err)
		}
		var ce *client.Error
		if _, err := p.ProduceTopic(ctx, "orders", rec); !errors.As(err, &ce) || ce.Code != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
}
