package gateway

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/api"
)

// TestRecordJSONMatchesEncodingJSON: the hand-rolled encoder produces
// exactly encoding/json's bytes for api.FetchResponse, on random records
// with nil and empty keys, odd header names and invalid UTF-8.
func TestRecordJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	names := []string{"", "h", "quote\"back\\slash", "ctl\x00\x01\x1f\t\n\r\b\f", "<html>&amp;", "é ü 日本", "bad\xff\xfeutf8", "line\u2028sep\u2029", "\x7f"}
	for round := range 300 {
		var recs []*kgo.Record
		for i := range r.IntN(5) {
			rec := &kgo.Record{Offset: int64(round*10 + i), Timestamp: time.UnixMilli(r.Int64N(1 << 42)), Key: randBytes(r), Value: randBytes(r)}
			for range r.IntN(3) {
				rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: names[r.IntN(len(names))], Value: randBytes(r)})
			}
			recs = append(recs, rec)
		}
		next, hwm := r.Int64N(1<<50), r.Int64N(1<<50)
		got := appendFetchJSON(nil, recs, next, hwm)
		want, err := json.Marshal(toAPI(recs, next, hwm))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d:\n got %s\nwant %s", round, got, want)
		}
	}
}

func randBytes(r *rand.Rand) []byte {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, r.IntN(40))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return b
}

func toAPI(recs []*kgo.Record, next, hwm int64) api.FetchResponse {
	out := api.FetchResponse{Records: []api.Record{}, NextOffset: next, HighWatermark: hwm}
	for _, r := range recs {
		rec := api.Record{Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(), Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			rec.Headers = append(rec.Headers, api.Header{Key: h.Key, Value: h.Value})
		}
		out.Records = append(out.Records, rec)
	}
	return out
}

func TestRecordJSONAllocatesNothingWithRoom(t *testing.T) {
	recs := benchRecords(100, 100)
	buf := make([]byte, 0, 64<<10)
	allocs := testing.AllocsPerRun(50, func() { buf = appendFetchJSON(buf[:0], recs, 100, 100) })
	if allocs != 0 {
		t.Fatalf("%v allocations", allocs)
	}
}

func benchRecords(n, valueBytes int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Offset: int64(i), Timestamp: time.UnixMilli(1_700_000_000_000), Key: []byte("key-0001"), Value: bytes.Repeat([]byte{'v'}, valueBytes)}
	}
	return recs
}

// BenchmarkRecordJSON measures the encoder against encoding/json on
// 100-byte records and reports records/s.
func BenchmarkRecordJSON(b *testing.B) {
	recs := benchRecords(1000, 100)
	b.Run("hand-rolled", func(b *testing.B) {
		buf := make([]byte, 0, 1<<20)
		b.ReportAllocs()
		for b.Loop() {
			buf = appendFetchJSON(buf[:0], recs, 1000, 1000)
		}
		b.ReportMetric(float64(len(recs)*b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(toAPI(recs, 1000, 1000)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(recs)*b.N)/b.Elapsed().Seconds(), "records/s")
	})
}
