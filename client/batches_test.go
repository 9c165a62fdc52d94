package client

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/client/session"
)

// kgoDecode is the reference: kgo.ProcessFetchPartition, each record
// converted to a Record (the SDK's decoder before batches.go).
func kgoDecode(t *testing.T, body []byte, req session.Fetch) fetched {
	t.Helper()
	part := &kmsg.FetchResponseTopicPartition{Partition: req.Partition.Partition, RecordBatches: body}
	opts := kgo.ProcessFetchPartitionOpts{Offset: req.Offset, Topic: req.Partition.Topic, Partition: req.Partition.Partition}
	fp, parsed := kgo.ProcessFetchPartition(opts, part, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		t.Fatalf("kgo: %v", fp.Err)
	}
	res := fetched{next: max(req.Offset, parsed)}
	for _, k := range fp.Records {
		r := Record{Topic: req.Partition.Topic, Partition: req.Partition.Partition, Offset: k.Offset,
			Timestamp: k.Timestamp, Key: k.Key, Value: k.Value, Epoch: req.Epoch}
		for _, h := range k.Headers {
			r.Headers = append(r.Headers, Header{Key: h.Key, Value: h.Value})
		}
		res.bytes += r.size()
		res.records = append(res.records, r)
		res.next = max(res.next, k.Offset+1)
	}
	return res
}

// randomBatch encodes n records from offset base: random keys, values and
// headers (some null), compressed with codec; control and log-append-time
// as asked.
func randomBatch(t *testing.T, rng *rand.Rand, base int64, n int, codec kgo.CompressionCodec, control, logAppend bool) []byte {
	t.Helper()
	bytesOf := func(max int) []byte {
		if rng.IntN(5) == 0 {
			return nil
		}
		b := make([]byte, rng.IntN(max))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	firstTime := int64(1_700_000_000_000 + rng.IntN(1_000_000))
	var body []byte
	var maxTime int64
	for i := range n {
		rec := kmsg.Record{TimestampDelta64: int64(rng.IntN(5000)), OffsetDelta: int32(i), Key: bytesOf(20), Value: bytesOf(200)}
		for range rng.IntN(3) {
			rec.Headers = append(rec.Headers, kmsg.Header{Key: string(bytesOf(8)), Value: bytesOf(8)})
		}
		maxTime = max(maxTime, firstTime+rec.TimestampDelta64)
		enc := rec.AppendTo(nil)
		rec.Length = int32(len(enc) - 1)
		body = rec.AppendTo(body)
	}
	var attrs int16
	if codec != kgo.NoCompression() {
		comp, err := kgo.DefaultCompressor(codec)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		out, used := comp.Compress(&buf, body)
		body = slices.Clone(out)
		attrs |= int16(used)
	}
	if logAppend {
		attrs |= rbLogAppendTime
		maxTime = firstTime + 777
	}
	if control {
		attrs |= rbControl | 0x10
	}
	batch := kmsg.RecordBatch{
		FirstOffset: base, Magic: 2, Attributes: attrs, LastOffsetDelta: int32(n - 1),
		FirstTimestamp: firstTime, MaxTimestamp: maxTime, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(n), Records: body,
	}
	b := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(b[rbLengthAt:], uint32(len(b)-rbOverhead))
	binary.BigEndian.PutUint32(b[rbCRCAt:], crc32.Checksum(b[rbAttributesAt:], castagnoli))
	return b
}

// TestBatchDecoderMatchesKgo: on thousands of random answers (several
// batches, every codec, control batches, log-append time, a random
// starting offset, sometimes a partial last batch) the decoder returns
// exactly what kgo's does.
func TestBatchDecoderMatchesKgo(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 4))
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
	for round := range 2000 {
		var body []byte
		offset := int64(rng.IntN(1000))
		next := offset
		for range 1 + rng.IntN(4) {
			n := 1 + rng.IntN(30)
			body = append(body, randomBatch(t, rng, next, n, codecs[rng.IntN(len(codecs))], rng.IntN(8) == 0, rng.IntN(6) == 0)...)
			next += int64(n) + int64(rng.IntN(3)) // compaction gaps
		}
		if rng.IntN(4) == 0 {
			body = body[:len(body)-rng.IntN(min(len(body), 40))] // a partial last batch
		}
		req := session.Fetch{Partition: session.Partition{Topic: "orders", Partition: 3}, Epoch: 9, Offset: offset + int64(rng.IntN(20))}
		got, err := decodeBatches(body, req, kgo.DefaultDecompressor())
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		want := kgoDecode(t, body, req)
		if got.next != want.next || got.bytes != want.bytes || len(got.records) != len(want.records) {
			t.Fatalf("round %d: next %d bytes %d records %d, kgo %d %d %d", round, got.next, got.bytes, len(got.records), want.next, want.bytes, len(want.records))
		}
		for i := range got.records {
			if !sameRecord(got.records[i], want.records[i]) {
				t.Fatalf("round %d record %d:\n got %+v\nwant %+v", round, i, got.records[i], want.records[i])
			}
		}
	}
}

func sameRecord(a, b Record) bool {
	if a.Topic != b.Topic || a.Partition != b.Partition || a.Offset != b.Offset || a.Epoch != b.Epoch ||
		!a.Timestamp.Equal(b.Timestamp) || !bytes.Equal(a.Key, b.Key) || !bytes.Equal(a.Value, b.Value) ||
		(a.Key == nil) != (b.Key == nil) || (a.Value == nil) != (b.Value == nil) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

// TestBatchDecoderRefusesDamage: a flipped bit is a CRC error, and no
// truncation or mutation of a batch makes the decoder panic.
func TestBatchDecoderRefusesDamage(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	req := session.Fetch{Partition: session.Partition{Topic: "t"}}
	good := randomBatch(t, rng, 0, 20, kgo.NoCompression(), false, false)
	bad := slices.Clone(good)
	bad[len(bad)-3] ^= 1
	if _, err := decodeBatches(bad, req, kgo.DefaultDecompressor()); err == nil {
		t.Fatal("a damaged batch decoded")
	}
	for range 5000 {
		b := slices.Clone(good)
		for range 1 + rng.IntN(4) {
			b[rng.IntN(len(b))] = byte(rng.Uint32())
		}
		// Recompute the CRC half the time, so the record parsing itself
		// meets the damage.
		if rng.IntN(2) == 0 && len(b) > rbAttributesAt {
			binary.BigEndian.PutUint32(b[rbCRCAt:], crc32.Checksum(b[rbAttributesAt:], castagnoli))
		}
		_, _ = decodeBatches(b[:rng.IntN(len(b)+1)], req, kgo.DefaultDecompressor())
	}
}

// BenchmarkDecodeRaw compares, in one run, the SDK's batch decoder with
// kgo.ProcessFetchPartition plus the copy into Records it replaced.
func BenchmarkDecodeRaw(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	t := &testing.T{}
	var body []byte
	for i := range 10 {
		body = append(body, randomBatch(t, rng, int64(i*1000), 1000, kgo.NoCompression(), false, false)...)
	}
	req := session.Fetch{Partition: session.Partition{Topic: "t"}}
	var ours, theirs time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := decodeBatches(body, req, kgo.DefaultDecompressor()); err != nil {
			b.Fatal(err)
		}
		ours += time.Since(start)
		start = time.Now()
		part := &kmsg.FetchResponseTopicPartition{RecordBatches: body}
		fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "t"}, part, kgo.DefaultDecompressor(), nil)
		recs := make([]Record, 0, len(fp.Records))
		for _, k := range fp.Records {
			recs = append(recs, Record{Topic: "t", Offset: k.Offset, Timestamp: k.Timestamp, Key: k.Key, Value: k.Value})
		}
		theirs += time.Since(start)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N)/10_000, "ns/record")
	b.ReportMetric(float64(theirs.Nanoseconds())/float64(b.N)/10_000, "kgo-ns/record")
	b.ReportMetric(float64(ours)/float64(theirs), "x-kgo")
}
