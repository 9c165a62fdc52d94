package broker

import (
	"encoding/binary"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// plainRecord is one record of a test batch.
type plainRecord struct {
	tsDelta     int64
	offsetDelta int32
	key, value  []byte
	headers     []kgo.RecordHeader
}

// testBatch encodes a v2 record batch of recs from first, its last
// offset first+lastDelta, with attributes attrs and a correct CRC.
func testBatch(first int64, lastDelta int32, attrs int16, recs []plainRecord) []byte {
	var raw []byte
	for _, r := range recs {
		body := kbin.AppendInt8(nil, 0)
		body = kbin.AppendVarlong(body, r.tsDelta)
		body = kbin.AppendVarint(body, r.offsetDelta)
		body = kbin.AppendVarintBytes(body, r.key)
		body = kbin.AppendVarintBytes(body, r.value)
		body = kbin.AppendVarint(body, int32(len(r.headers)))
		for _, h := range r.headers {
			body = kbin.AppendVarintString(body, h.Key)
			body = kbin.AppendVarintBytes(body, h.Value)
		}
		raw = append(kbin.AppendVarint(raw, int32(len(body))), body...)
	}
	b := kbin.AppendInt64(nil, first)
	b = kbin.AppendInt32(b, 0)     // length, below
	b = kbin.AppendInt32(b, 5)     // partition leader epoch
	b = kbin.AppendInt8(b, 2)      // magic
	b = kbin.AppendInt32(b, 0)     // crc, below
	b = kbin.AppendInt16(b, attrs) // attributes
	b = kbin.AppendInt32(b, lastDelta)
	b = kbin.AppendInt64(b, 1_700_000_000_000) // first timestamp
	b = kbin.AppendInt64(b, 1_700_000_009_999) // max timestamp
	b = kbin.AppendInt64(b, 77)                // producer id
	b = kbin.AppendInt16(b, 3)                 // producer epoch
	b = kbin.AppendInt32(b, 0)                 // first sequence
	b = kbin.AppendInt32(b, int32(len(recs)))
	b = append(b, raw...)
	binary.BigEndian.PutUint32(b[batchLengthAt:], uint32(len(b)-batchLogOverhead))
	binary.BigEndian.PutUint32(b[batchCRCAt:], crc32.Checksum(b[batchAttributesAt:], castagnoli))
	return b
}

// kgoDecode is what kgo makes of in for a fetch from offset (as shape
// called it before the fast path).
func kgoDecode(in []byte, offset int64) ([]*kgo.Record, int64, error) {
	p := kmsg.NewFetchResponseTopicPartition()
	p.Partition, p.RecordBatches = 4, in
	fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: offset, Topic: "t", Partition: 4}, &p, kgo.DefaultDecompressor(), nil)
	return fp.Records, max(next, offset), fp.Err
}

// sameAsKgo fails t when decodePlain's answer for in at offset differs
// from kgo's in any record field or the next offset; want says whether
// the fast path should take in at all.
func sameAsKgo(t *testing.T, name string, in []byte, offset int64, want bool) {
	t.Helper()
	recs, next, ok := decodePlain(in, "t", 4, offset)
	if ok != want {
		t.Fatalf("%s at %d: fast path took it %v, want %v", name, offset, ok, want)
	}
	if !ok {
		return
	}
	krecs, knext, err := kgoDecode(in, offset)
	if err != nil {
		t.Fatalf("%s at %d: fast path took an answer kgo refuses: %v", name, offset, err)
	}
	if next != knext || len(recs) != len(krecs) {
		t.Fatalf("%s at %d: next %d, %d records; kgo: next %d, %d records", name, offset, next, len(recs), knext, len(krecs))
	}
	for i := range recs {
		if !reflect.DeepEqual(*recs[i], *krecs[i]) {
			t.Fatalf("%s at %d: record %d\n got %+v\nkgo %+v", name, offset, i, *recs[i], *krecs[i])
		}
	}
}

// TestDecodePlainIsKgos: the decoded answer's fast path makes the records
// and next offset kgo makes, field for field, for every offset in and
// around plain batches — keys and values nil, empty and set, headers,
// offset gaps (compaction), an emptied batch, several batches, a partial
// batch at the end — and leaves every other batch to kgo.
func TestDecodePlainIsKgos(t *testing.T) {
	h := []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "", Value: nil}, {Key: "c", Value: []byte{}}}
	one := testBatch(10, 0, 0, []plainRecord{{key: []byte("k"), value: []byte("v")}})
	five := testBatch(20, 6, 0, []plainRecord{
		{tsDelta: 0, offsetDelta: 0, key: nil, value: []byte("a")},
		{tsDelta: 3, offsetDelta: 1, key: []byte{}, value: nil},
		{tsDelta: -2, offsetDelta: 3, key: []byte("x"), value: []byte{}, headers: h},
		{tsDelta: 9, offsetDelta: 4, key: []byte("y"), value: []byte("long value long value")},
		{tsDelta: 9, offsetDelta: 6, key: nil, value: nil, headers: h[:1]},
	})
	emptied := testBatch(27, 4, 0, nil) // compacted away: offsets 27–31, no records
	next := testBatch(32, 1, 0, []plainRecord{{offsetDelta: 0, value: []byte("p")}, {offsetDelta: 1, value: []byte("q")}})
	joined := append(append(append(append([]byte{}, one...), five...), emptied...), next...)
	cases := map[string][]byte{
		"one":     one,
		"five":    five,
		"emptied": emptied,
		"joined":  joined,
		"partial": append(append([]byte{}, five...), next[:len(next)-3]...),
		"header":  append(append([]byte{}, one...), next[:30]...),
		"none":    nil,
	}
	for name, in := range cases {
		for offset := int64(0); offset <= 36; offset++ {
			sameAsKgo(t, name, in, offset, true)
		}
	}
	other := func(mutate func(b []byte)) []byte {
		b := append([]byte{}, five...)
		mutate(b)
		return b
	}
	recrc := func(b []byte) {
		binary.BigEndian.PutUint32(b[batchCRCAt:], crc32.Checksum(b[batchAttributesAt:], castagnoli))
	}
	for name, in := range map[string][]byte{
		"log append time": testBatch(20, 0, 0x08, []plainRecord{{value: []byte("v")}}),
		"transactional":   testBatch(20, 0, 0x10, []plainRecord{{value: []byte("v")}}),
		"control":         testBatch(20, 0, 0x20, []plainRecord{{key: []byte{0, 0, 0, 1}, value: []byte("v")}}),
		"gzip":            testBatch(20, 0, 0x01, []plainRecord{{value: []byte("v")}}),
		"bad crc":         other(func(b []byte) { b[len(b)-1] ^= 1 }),
		"magic 1":         other(func(b []byte) { b[batchMagicAt] = 1 }),
		"count too big":   other(func(b []byte) { binary.BigEndian.PutUint32(b[batchNumRecordsAt:], 1000); recrc(b) }),
		"count negative":  other(func(b []byte) { binary.BigEndian.PutUint32(b[batchNumRecordsAt:], 0xffffffff); recrc(b) }),
		"count one more":  other(func(b []byte) { binary.BigEndian.PutUint32(b[batchNumRecordsAt:], 6); recrc(b) }),
		"first offset -1": other(func(b []byte) { binary.BigEndian.PutUint64(b, ^uint64(0)); recrc(b) }),
		"plain then not":  append(append([]byte{}, one...), testBatch(11, 0, 0x08, []plainRecord{{value: []byte("v")}})...),
	} {
		for _, offset := range []int64{0, 10, 20, 22} {
			sameAsKgo(t, name, in, offset, false)
		}
	}
}

// FuzzDecodePlain: whatever bytes come, an answer the fast path takes is
// decoded exactly as kgo decodes it.
func FuzzDecodePlain(f *testing.F) {
	f.Add(testBatch(10, 0, 0, []plainRecord{{key: []byte("k"), value: []byte("v")}}), int64(10))
	f.Add(testBatch(20, 6, 0, []plainRecord{{value: []byte("a")}, {offsetDelta: 6, headers: []kgo.RecordHeader{{Key: "h"}}}}), int64(21))
	f.Fuzz(sameAsKgoWhenTaken)
}

// sameAsKgoWhenTaken fails t when the fast path takes in and decodes it
// otherwise than kgo.
func sameAsKgoWhenTaken(t *testing.T, in []byte, offset int64) {
	recs, next, ok := decodePlain(in, "t", 4, offset)
	if !ok {
		return
	}
	krecs, knext, err := kgoDecode(in, offset)
	if err != nil || next != knext || len(recs) != len(krecs) {
		t.Fatalf("next %d, %d records; kgo: next %d, %d records, %v", next, len(recs), knext, len(krecs), err)
	}
	for i := range recs {
		if !reflect.DeepEqual(*recs[i], *krecs[i]) {
			t.Fatalf("record %d\n got %+v\nkgo %+v", i, *recs[i], *krecs[i])
		}
	}
}
