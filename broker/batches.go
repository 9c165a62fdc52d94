package broker

import "encoding/binary"

// Record batch header (magic 2) offsets, from the Kafka protocol:
//
//	baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 |
//	magic int8 | crc int32 | attributes int16 | lastOffsetDelta int32 | ...
const (
	batchLengthAt     = 8  // batchLength counts the bytes after itself
	batchMagicAt      = 16 // same place in message sets v0/v1
	lastOffsetDeltaAt = 23
	batchLogOverhead  = 12 // baseOffset + batchLength
	batchHeaderSize   = 61 // whole v2 header, records follow
	// legacyMessageMin is the smallest message of the old sets (v0:
	// offset, size, crc, magic, attributes, key and value lengths): a
	// shorter "batch" would have its magic byte read from the next one.
	legacyMessageMin = 26
)

// wholeBatches returns the prefix of in made of complete batches, and the
// offset after the last of them (at least from). Only headers are read:
// nothing is decoded, decompressed or copied. A trailing partial batch
// (Kafka cuts the response at MaxBytes) is dropped, and so is anything
// after a header we cannot read.
//
// For record batches (magic 2) the last offset is baseOffset +
// lastOffsetDelta. For the old message sets (magic 0 and 1) the offset
// field of a wrapper message is the offset of its last inner message.
func wholeBatches(in []byte, from int64) ([]byte, int64) {
	next := from
	n := 0
	for {
		size, last, ok := nextBatch(in[n:])
		if !ok {
			return in[:n], next
		}
		next = max(next, last+1)
		n += size
	}
}

// nextBatch reads the header of the batch at the start of in: its size
// and last offset, ok false when in does not start with a whole batch
// whose header we can read.
func nextBatch(in []byte) (size int, last int64, ok bool) {
	if len(in) <= batchMagicAt {
		return 0, 0, false
	}
	length := int64(int32(binary.BigEndian.Uint32(in[batchLengthAt:])))
	end := batchLogOverhead + length
	if length < 0 || end > int64(len(in)) {
		return 0, 0, false
	}
	last = int64(binary.BigEndian.Uint64(in))
	switch in[batchMagicAt] {
	case 2:
		if end < batchHeaderSize {
			return 0, 0, false
		}
		last += int64(int32(binary.BigEndian.Uint32(in[lastOffsetDeltaAt:])))
	case 0, 1:
		if end < legacyMessageMin {
			return 0, 0, false
		}
	default:
		return 0, 0, false
	}
	return int(end), last, true
}
