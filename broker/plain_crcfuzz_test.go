package broker

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FuzzDecodePlainPastTheCRC is FuzzDecodePlain with every whole batch of
// the input made plain (magic 2, attributes 0) and its CRC made to
// match before decoding (review24): a mutation inside a batch — a record,
// a header, a timestamp, a producer field — breaks the CRC, so
// FuzzDecodePlain's fast path refused nearly every input it made, and
// what the fuzzer changed in the records was never compared with kgo
// (only the bytes before the CRC: offsets, length, leader epoch). A fast
// path planted to keep only a producer epoch's low byte passed
// FuzzDecodePlain for 60 s and failed this one within seconds.
func FuzzDecodePlainPastTheCRC(f *testing.F) {
	f.Add(testBatch(10, 0, 0, []plainRecord{{key: []byte("k"), value: []byte("v")}}), int64(10))
	f.Add(testBatch(20, 6, 0, []plainRecord{{value: []byte("a")}, {tsDelta: -2, offsetDelta: 6, headers: []kgo.RecordHeader{{Key: "h"}}}}), int64(21))
	f.Add(append(testBatch(20, 6, 0, []plainRecord{{value: []byte("a")}, {offsetDelta: 6}}), testBatch(27, 1, 0, []plainRecord{{value: []byte("b")}, {offsetDelta: 1}})...), int64(0))
	f.Fuzz(func(t *testing.T, in []byte, offset int64) {
		sameAsKgoWhenTaken(t, plainWithCRC(in), offset)
	})
}

// plainWithCRC is a copy of in with each whole batch's magic 2,
// attributes 0 and a CRC that matches.
func plainWithCRC(in []byte) []byte {
	in = append([]byte(nil), in...)
	for rest := in; len(rest) > batchMagicAt+1; {
		length := int32(binary.BigEndian.Uint32(rest[batchLengthAt:])) + batchLogOverhead
		if length < batchHeaderSize || len(rest) < int(length) {
			break
		}
		b := rest[:length]
		rest = rest[length:]
		b[batchMagicAt] = 2
		binary.BigEndian.PutUint16(b[batchAttributesAt:], 0)
		binary.BigEndian.PutUint32(b[batchCRCAt:], crc32.Checksum(b[batchAttributesAt:], castagnoli))
	}
	return in
}
