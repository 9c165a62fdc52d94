package broker

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzReadAheadCut feeds any bytes as a broker's answer to the
// read-ahead's index and cut: nothing panics, and whenever the chunk
// says it answers a fetch, the raw answer is the one Kafka's rule gives
// (from the batch holding the offset, that batch whole, then whole
// batches while the total fits in max bytes), ending past the offset.
// The decoded answer of the same cut is kgo's to make; it must not panic.
func FuzzReadAheadCut(f *testing.F) {
	var seed []byte
	for i := range 6 {
		recs := make([]kmsg.Record, 1+i%3)
		for j := range recs {
			recs[j] = kmsg.Record{OffsetDelta: int32(j), Value: bytes.Repeat([]byte{'v'}, 10*i)}
		}
		seed = appendBatch(seed, int64(i*3), 1_700_000_000_000, recs)
	}
	f.Add(seed, int64(0), int32(1), int64(0), int64(100))
	f.Add(seed, int64(4), int32(200), int64(2), int64(100))
	f.Add(seed[:len(seed)-5], int64(9), int32(1000), int64(9), int64(12))
	f.Add([]byte{}, int64(0), int32(1), int64(0), int64(0))
	c := &Client{cfg: Config{MaxFetchBytes: 1 << 20}, decompressor: kgo.DefaultDecompressor()}
	f.Fuzz(func(t *testing.T, data []byte, offset int64, limit int32, from, hw int64) {
		res := FetchResult{Batches: data, HighWatermark: hw}
		res.Batches, _ = wholeBatches(data, 0)
		view := viewChunk(route{}, &FetchRequest{Offset: from}, &res)
		if view == nil || offset < 0 {
			return
		}
		req := &FetchRequest{Offset: offset, MaxBytes: limit, Raw: true}
		at, ok := view.answers(offset, clampBytes(limit, c.cfg.MaxFetchBytes))
		if !ok {
			return
		}
		view.shared.refs.Add(2)
		got, err := c.serveChunk(view, at, req, -1)
		if err != nil {
			t.Fatalf("raw cut: %v", err)
		}
		// Kafka's rule, from the index alone.
		i := 0
		for view.ends[i] <= offset {
			i++
		}
		start := int(view.starts[i])
		want, end := view.batches[start:], 0
		for j := i; j < len(view.starts); j++ {
			next := len(view.batches)
			if j+1 < len(view.starts) {
				next = int(view.starts[j+1])
			}
			if j > i && next-start > int(clampBytes(limit, c.cfg.MaxFetchBytes)) {
				break
			}
			end = next - start
		}
		if !bytes.Equal(got.Batches, want[:end]) || got.NextOffset <= offset {
			t.Fatalf("at %d, max %d: cut %d bytes next %d, want %d bytes", offset, limit, len(got.Batches), got.NextOffset, end)
		}
		req.Raw = false
		if dec, err := c.serveChunk(view, at, req, -1); err == nil {
			for _, r := range dec.Records {
				if r.Offset < offset {
					t.Fatalf("decoded record %d below the offset %d", r.Offset, offset)
				}
			}
		}
	})
}
