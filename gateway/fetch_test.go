package gateway

import (
	"bytes"
	"context"
	cryptorand "crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/ocap"
)

// checkRecords compares fetched JSON records with the produced ones.
func checkRecords(t *testing.T, got []api.Record, want []*kgo.Record, firstOffset int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i, r := range got {
		w := want[i]
		if r.Offset != firstOffset+int64(i) || r.Timestamp != w.Timestamp.UnixMilli() ||
			!bytes.Equal(r.Key, w.Key) || (r.Key == nil) != (w.Key == nil) || !bytes.Equal(r.Value, w.Value) {
			t.Fatalf("record %d: %+v, want offset %d %+v", i, r, firstOffset+int64(i), w)
		}
		if len(r.Headers) != len(w.Headers) || r.Headers[0].Key != w.Headers[0].Key || !bytes.Equal(r.Headers[0].Value, w.Headers[0].Value) {
			t.Fatalf("record %d headers %+v, want %+v", i, r.Headers, w.Headers)
		}
	}
}

func TestFetchJSONReturnsProducedRecords(t *testing.T) {
	h := newHarness(t, nil)
	want := h.produce(1, 5)
	tok, _ := h.mint(capClaims(1))

	r := h.get(tok, recordsPath(1, "offset=0"))
	if r.status != http.StatusOK || r.header.Get("Content-Type") != api.MediaJSON {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	f := r.fetch(t)
	checkRecords(t, f.Records, want, 0)
	if f.NextOffset != 5 || f.HighWatermark != 5 || r.header.Get(api.HeaderNextOffset) != "5" || r.header.Get(api.HeaderHighWatermark) != "5" {
		t.Fatalf("next %d hwm %d headers %v", f.NextOffset, f.HighWatermark, r.header)
	}

	f = h.get(tok, recordsPath(1, "offset=2")).fetch(t)
	checkRecords(t, f.Records, want[2:], 2)

	r = h.get(tok, recordsPath(1, "offset=5&max_wait_ms=0"))
	if f = r.fetch(t); r.status != http.StatusOK || len(f.Records) != 0 || f.NextOffset != 5 || f.HighWatermark != 5 {
		t.Fatalf("fetch at the end: %d %s", r.status, r.body)
	}
}

func TestFetchRawReturnsUntouchedBatches(t *testing.T) {
	h := newHarness(t, nil)
	want := h.produce(2, 4)
	tok, _ := h.mint(capClaims(2))

	r := h.get(tok, recordsPath(2, "offset=0"), "Accept", api.MediaRecordBatch)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != api.MediaRecordBatch {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	if r.header.Get(api.HeaderNextOffset) != "4" || r.header.Get(api.HeaderHighWatermark) != "4" {
		t.Fatalf("offset headers %v", r.header)
	}
	direct, err := h.kc.Fetch(context.Background(), broker.FetchRequest{Topic: testTopic, Partition: 2, Offset: 0, Raw: true})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.body, direct.Batches) {
		t.Fatalf("gateway batches (%d bytes) differ from the broker's (%d bytes)", len(r.body), len(direct.Batches))
	}
	got := decodeBatches(t, r.body)
	if len(got) != len(want) {
		t.Fatalf("%d records in batches, want %d", len(got), len(want))
	}
	for i, rec := range got {
		if rec.Offset != int64(i) || !bytes.Equal(rec.Value, want[i].Value) || !bytes.Equal(rec.Key, want[i].Key) {
			t.Fatalf("record %d: offset %d key %q value %q", i, rec.Offset, rec.Key, rec.Value)
		}
	}
}

// Large raw answers go out straight from the broker's recycled buffer
// (rawBody): many at once, each must still be the broker's bytes for its
// offset, not those of an answer that reused the buffer meanwhile.
func TestFetchLargeRawAnswersConcurrently(t *testing.T) {
	h := newHarness(t, nil)
	const batches = 24
	for range batches {
		recs := []*kgo.Record{{Value: make([]byte, 30<<10)}, {Value: make([]byte, 30<<10)}}
		for _, r := range recs {
			_, _ = cryptorand.Read(r.Value) // incompressible
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := h.kc.Produce(ctx, testTopic, 3, recs); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	tok, _ := h.mint(capClaims(3))
	want := map[int64][]byte{}
	for off := int64(0); off < 2*batches; off += 2 {
		direct, err := h.kc.Fetch(context.Background(), broker.FetchRequest{Topic: testTopic, Partition: 3, Offset: off, MaxBytes: 200 << 10, Raw: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(direct.Batches) < rawStreamMin {
			t.Fatalf("offset %d: %d bytes, too small to be streamed", off, len(direct.Batches))
		}
		want[off] = bytes.Clone(direct.Batches)
		direct.Release()
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				off := int64((w*7+i)%batches) * 2
				req, _ := http.NewRequest(http.MethodGet, h.base+recordsPath(3, fmt.Sprintf("offset=%d&max_bytes=%d", off, 200<<10)), nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				req.Header.Set("Accept", api.MediaRecordBatch)
				resp, err := h.client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Errorf("offset %d: %d %v", off, resp.StatusCode, err)
					return
				}
				if !bytes.Equal(body, want[off]) {
					t.Errorf("offset %d: %d bytes differ from the broker's %d", off, len(body), len(want[off]))
					return
				}
			}
		}()
	}
	wg.Wait()
}

// decodeBatches decodes record batches the way a raw-format client would:
// with kgo.ProcessFetchPartition.
func decodeBatches(t *testing.T, b []byte) []*kgo.Record {
	t.Helper()
	p := kmsg.NewFetchResponseTopicPartition()
	p.RecordBatches, p.HighWatermark = b, 1<<40
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: testTopic}, &p, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		t.Fatalf("decode batches: %v", fp.Err)
	}
	return fp.Records
}

func TestLongPollReturnsAsSoonAsARecordIsProduced(t *testing.T) {
	h := newHarness(t, nil)
	tok, _ := h.mint(capClaims(0))
	done := make(chan response, 1)
	start := time.Now()
	go func() { done <- h.get(tok, recordsPath(0, "offset=0&max_wait_ms=12000")) }()
	waitFor(t, "the fetch in flight", func() bool { return h.gw.inflight.count() == 1 })
	select {
	case r := <-done:
		t.Fatalf("long poll answered before anything was produced: %d %s", r.status, r.body)
	default:
	}
	want := h.produce(0, 1)
	r := <-done
	if elapsed := time.Since(start); elapsed >= 12*time.Second {
		t.Fatalf("long poll waited the whole max wait (%v)", elapsed)
	}
	if r.status != http.StatusOK {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	checkRecords(t, r.fetch(t).Records, want, 0)
}

func TestFetchOffsetRangeCaveat(t *testing.T) {
	h := newHarness(t, nil)
	want := h.produce(3, 6)
	c := capClaims(3)
	c.Offsets = &ocap.OffsetRange{From: 2, To: 4}
	tok, _ := h.mint(c)

	expectError(t, h.get(tok, recordsPath(3, "offset=1")), http.StatusForbidden, api.CodeForbidden)
	expectError(t, h.get(tok, recordsPath(3, "offset=4")), http.StatusForbidden, api.CodeForbidden)
	f := h.get(tok, recordsPath(3, "offset=2")).fetch(t)
	checkRecords(t, f.Records, want[2:4], 2)
	if f.NextOffset != 4 || f.HighWatermark != 6 {
		t.Fatalf("next_offset %d (want the range end 4), hwm %d", f.NextOffset, f.HighWatermark)
	}
	expectError(t, h.get(tok, recordsPath(3, "offset=2"), "Accept", api.MediaRecordBatch), http.StatusForbidden, api.CodeForbidden)
}

func TestFetchOffsetOutOfRange(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(1, 3)
	tok, _ := h.mint(capClaims(1))
	r := h.get(tok, recordsPath(1, "offset=100"))
	expectError(t, r, http.StatusRequestedRangeNotSatisfiable, api.CodeOffsetOutOfRange)
	var e api.ErrorBody
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error.Details["earliest"] != 0.0 || e.Error.Details["latest"] != 3.0 {
		t.Fatalf("details %v (%v)", e.Error.Details, err)
	}
}

func TestFetchUnknownTopicOrPartition(t *testing.T) {
	h := newHarness(t, nil)
	c := capClaims(0)
	c.Topic = "nosuch"
	tok, _ := h.mint(c)
	expectError(t, h.get(tok, "/v1/topics/nosuch/partitions/0/records?offset=0"), http.StatusNotFound, api.CodeNotFound)
	tok, _ = h.mint(capClaims(99))
	expectError(t, h.get(tok, recordsPath(99, "offset=0")), http.StatusNotFound, api.CodeNotFound)
}

func TestBrokerFaultAnswers502NeverData(t *testing.T) {
	h := newHarness(t, nil)
	want := h.produce(1, 2)
	tok, _ := h.mint(capClaims(1))
	fault := h.kafka.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: testTopic, Err: kerr.UnknownServerError, Count: -1})
	for _, accept := range []string{api.MediaJSON, api.MediaRecordBatch} {
		r := h.get(tok, recordsPath(1, "offset=0"), "Accept", accept)
		expectError(t, r, http.StatusBadGateway, api.CodeBrokerError)
	}
	fault.Remove()
	checkRecords(t, h.get(tok, recordsPath(1, "offset=0")).fetch(t).Records, want, 0)
}

// TestBrokerFailuresNameNoBroker is the probe of redteam12 #3: with the
// Kafka fleet unreachable, any capability holder's fetch or produce was
// answered "broker: fetch: unable to dial: dial tcp 10.0.0.7:9092:
// connect: connection refused" — the brokers' addresses, which the
// gateways otherwise keep from tenants (the listener's Metadata names
// the gateway). Now the answer says what failed and how, never where.
func TestBrokerFailuresNameNoBroker(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Broker.RequestTimeout = time.Second })
	fetch, _ := h.mint(capClaims(0))
	produce, _ := h.mint(withOps(capClaims(1), "produce"))
	brokers := h.kafka.Addrs()
	h.kafka.Close()
	for _, r := range []response{
		h.get(fetch, recordsPath(0, "offset=0&max_wait_ms=10")),
		h.do(http.MethodPost, recordsURL(1), produce, bytes.NewReader([]byte(`{"records":[{"value":"eA=="}]}`)), "Content-Type", api.MediaJSON),
	} {
		if r.status != http.StatusServiceUnavailable && r.status != http.StatusBadGateway {
			t.Fatalf("with Kafka gone: %d %s, want 502 or 503", r.status, r.body)
		}
		for _, addr := range brokers {
			if bytes.Contains(r.body, []byte(addr)) {
				t.Fatalf("the answer names the broker %s: %s", addr, r.body)
			}
		}
	}
}
