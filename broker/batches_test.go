package broker

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// encodeBatch builds a valid uncompressed v2 record batch of n records
// starting at first.
func encodeBatch(first int64, n int, rng *rand.Rand) []byte {
	recs := make([]kmsg.Record, n)
	for i := range recs {
		recs[i] = kmsg.Record{
			OffsetDelta:    int32(i),
			TimestampDelta: int32(i),
			Key:            []byte{byte(i)},
			Value:          bytes.Repeat([]byte{'v'}, rng.IntN(200)),
		}
	}
	return appendBatch(nil, first, 1_700_000_000_000, recs)
}

// appendBatch appends a valid uncompressed v2 record batch of recs (their
// OffsetDelta and TimestampDelta set by the caller) at first, stamped ts.
func appendBatch(dst []byte, first, ts int64, recs []kmsg.Record) []byte {
	var body []byte
	var maxDelta int64
	for _, r := range recs {
		enc := r.AppendTo(nil)
		r.Length = int32(len(enc) - 1) // enc was encoded with a one-byte zero length
		body = r.AppendTo(body)
		maxDelta = max(maxDelta, r.TimestampDelta64, int64(r.TimestampDelta))
	}
	rb := kmsg.RecordBatch{
		FirstOffset:     first,
		Magic:           2,
		LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp:  ts,
		MaxTimestamp:    ts + maxDelta,
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      int32(len(recs)),
		Records:         body,
	}
	rb.Length = int32(batchHeaderSize - batchLogOverhead + len(body))
	start := len(dst)
	dst = rb.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start+17:], crc32.Checksum(dst[start+21:], crc32c))
	return dst
}

// naiveWholeBatches is the slow reference: decode every batch fully.
func naiveWholeBatches(in []byte, from int64) ([]byte, int64) {
	next, n := from, 0
	for n < len(in) {
		var rb kmsg.RecordBatch
		if len(in)-n < batchLogOverhead {
			break
		}
		length := int(int32(binary.BigEndian.Uint32(in[n+8:])))
		if length < 0 || n+batchLogOverhead+length > len(in) {
			break
		}
		if err := rb.ReadFrom(in[n : n+batchLogOverhead+length]); err != nil || rb.Magic != 2 {
			break
		}
		next = max(next, rb.FirstOffset+int64(rb.LastOffsetDelta)+1)
		n += batchLogOverhead + length
	}
	return in[:n], next
}

func TestWholeBatchesMatchesFullDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 2000 {
		var log []byte
		offset := rng.Int64N(1000)
		from := offset + rng.Int64N(3)
		for range rng.IntN(6) {
			n := 1 + rng.IntN(8)
			log = append(log, encodeBatch(offset, n, rng)...)
			offset += int64(n) + rng.Int64N(3) // compaction leaves gaps
		}
		cut := log[:rng.IntN(len(log)+1)]
		got, gotNext := wholeBatches(cut, from)
		want, wantNext := naiveWholeBatches(cut, from)
		if len(got) != len(want) || gotNext != wantNext {
			t.Fatalf("iteration %d (cut %d of %d): got %d bytes next %d, want %d bytes next %d",
				iter, len(cut), len(log), len(got), gotNext, len(want), wantNext)
		}
		if len(got) > 0 {
			recs := decodeBatches(t, got, "t", 0, 0)
			if last := recs[len(recs)-1].Offset; gotNext != max(from, last+1) {
				t.Fatalf("iteration %d: next %d, last decoded offset %d", iter, gotNext, last)
			}
		}
	}
}

func TestWholeBatchesStopsAtUnreadableHeaders(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	good := encodeBatch(10, 3, rng)

	unknownMagic := append([]byte(nil), encodeBatch(13, 1, rng)...)
	unknownMagic[batchMagicAt] = 7
	negative := append([]byte(nil), encodeBatch(13, 1, rng)...)
	binary.BigEndian.PutUint32(negative[batchLengthAt:], 0xffffff00)
	short := make([]byte, 40) // v2 magic, length too small for a header
	binary.BigEndian.PutUint32(short[batchLengthAt:], 28)
	short[batchMagicAt] = 2

	for name, tail := range map[string][]byte{"unknown magic": unknownMagic, "negative length": negative, "short v2": short} {
		got, next := wholeBatches(append(append([]byte(nil), good...), tail...), 5)
		if len(got) != len(good) || next != 13 {
			t.Errorf("%s: got %d bytes next %d, want %d next 13", name, len(got), next, len(good))
		}
	}

	// Old message sets: the offset field is the last inner offset.
	msg := make([]byte, 12+14)
	binary.BigEndian.PutUint64(msg, 41)
	binary.BigEndian.PutUint32(msg[batchLengthAt:], 14)
	msg[batchMagicAt] = 1
	if got, next := wholeBatches(msg, 0); len(got) != len(msg) || next != 42 {
		t.Errorf("message set v1: got %d bytes next %d, want %d next 42", len(got), next, len(msg))
	}
	if got, next := wholeBatches(nil, 7); len(got) != 0 || next != 7 {
		t.Errorf("empty: got %d bytes next %d", len(got), next)
	}
}
