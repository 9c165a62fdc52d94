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
	for len(in)-n > batchMagicAt {
		b := in[n:]
		length := int64(int32(binary.BigEndian.Uint32(b[batchLengthAt:])))
		end := batchLogOverhead + length
		if length < 0 || end > int64(len(b)) {
			break
		}
		last := int64(binary.BigEndian.Uint64(b))
		switch b[batchMagicAt] {
		case 2:
			if end < batchHeaderSize {
				return in[:n], next
			}
			last += int64(int32(binary.BigEndian.Uint32(b[lastOffsetDeltaAt:])))
		case 0, 1:
		default:
			return in[:n], next
		}
		next = max(next, last+1)
		n += int(end)
	}
	return in[:n], next
}
