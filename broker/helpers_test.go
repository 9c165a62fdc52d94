package broker

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// startEmbedded starts a kfake cluster for one test.
func startEmbedded(t testing.TB, cfg EmbeddedConfig) *Embedded {
	t.Helper()
	e, err := StartEmbedded(cfg)
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	t.Cleanup(e.Close)
	return e
}

// newTestClient connects a Client to e; edit adjusts the config.
func newTestClient(t testing.TB, e *Embedded, edit func(*Config)) *Client {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Seeds = e.Addrs()
	cfg.RequestTimeout = 5 * time.Second
	if edit != nil {
		edit(&cfg)
	}
	c, err := New(cfg, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// testCtx is a context bounded well inside the suite's time budget.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// makeRecords builds n records numbered from first, with keys, values,
// headers and millisecond timestamps that differ per record.
func makeRecords(first, n int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	base := time.UnixMilli(1_700_000_000_000)
	for i := range recs {
		k := first + i
		recs[i] = &kgo.Record{
			Key:       []byte(fmt.Sprintf("key-%d", k)),
			Value:     []byte(fmt.Sprintf("value-%d-%s", k, bytes.Repeat([]byte{'x'}, k%7))),
			Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(k))}, {Key: "n", Value: nil}},
			Timestamp: base.Add(time.Duration(k) * time.Millisecond),
		}
	}
	return recs
}

// produce writes recs through c, failing the test on error.
func produce(t testing.TB, c *Client, topic string, partition int32, recs []*kgo.Record) int64 {
	t.Helper()
	base, err := c.Produce(testCtx(t), topic, partition, recs)
	if err != nil {
		t.Fatalf("Produce: %v", err)
	}
	return base
}

// produceOneBatch writes recs to topic/partition of e as exactly one
// batch. It encodes the batch itself and sends one Produce request (acks
// all): a producer decides its own batch boundaries (kgo, even with
// manual flushing, once cut 10 records 3 + 7 in CI's race step), and the
// tests that use this are about batch boundaries.
func produceOneBatch(t testing.TB, e *Embedded, topic string, partition int32, recs []*kgo.Record) {
	t.Helper()
	// Produce v13 names topics by id only: stay below it.
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Addrs()...), kgo.MaxVersions(kversion.V3_6_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ts := time.Now().UnixMilli() // records without a timestamp get now
	if len(recs) > 0 && !recs[0].Timestamp.IsZero() {
		ts = recs[0].Timestamp.UnixMilli()
	}
	krecs := make([]kmsg.Record, len(recs))
	for i, r := range recs {
		krecs[i] = kmsg.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		if !r.Timestamp.IsZero() {
			krecs[i].TimestampDelta64 = r.Timestamp.UnixMilli() - ts
		}
		for _, h := range r.Headers {
			krecs[i].Headers = append(krecs[i].Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, appendBatch(nil, 0, ts, krecs)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.Request(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	for _, t2 := range kresp.(*kmsg.ProduceResponse).Topics {
		for _, p := range t2.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("produce %s/%d: %v", topic, partition, err)
			}
		}
	}
}

// checkRecord compares a fetched record with the one produced at offset.
func checkRecord(t testing.TB, got, want *kgo.Record, offset int64) {
	t.Helper()
	if got.Offset != offset {
		t.Fatalf("offset: got %d, want %d", got.Offset, offset)
	}
	if !bytes.Equal(got.Key, want.Key) || !bytes.Equal(got.Value, want.Value) {
		t.Fatalf("offset %d: got key %q value %q, want %q %q", offset, got.Key, got.Value, want.Key, want.Value)
	}
	if !got.Timestamp.Equal(want.Timestamp) {
		t.Fatalf("offset %d: timestamp %v, want %v", offset, got.Timestamp, want.Timestamp)
	}
	if len(got.Headers) != len(want.Headers) {
		t.Fatalf("offset %d: %d headers, want %d", offset, len(got.Headers), len(want.Headers))
	}
	for i := range got.Headers {
		if got.Headers[i].Key != want.Headers[i].Key || !bytes.Equal(got.Headers[i].Value, want.Headers[i].Value) {
			t.Fatalf("offset %d: header %d = %+v, want %+v", offset, i, got.Headers[i], want.Headers[i])
		}
	}
}

// decodeBatches decodes raw batches the way a consumer of a raw fetch
// would, skipping records below from.
func decodeBatches(t testing.TB, batches []byte, topic string, partition int32, from int64) []*kgo.Record {
	t.Helper()
	p := kmsg.NewFetchResponseTopicPartition()
	p.Partition = partition
	p.RecordBatches = batches
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: from, Topic: topic, Partition: partition}, &p, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		t.Fatalf("decode raw batches: %v", fp.Err)
	}
	return fp.Records
}

// observeFetches counts Fetch requests reaching the cluster without
// touching them; Wait on the handle sequences a test after a fetch has
// reached the broker (and so is parked in its long poll).
func observeFetches(e *Embedded) *kfake.FaultHandle {
	return e.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Observe: true, Count: -1})
}
