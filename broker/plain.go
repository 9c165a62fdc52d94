package broker

import (
	"encoding/binary"
	"hash/crc32"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The decoded answer's fast path: the common record batch — magic 2,
// attributes 0 (uncompressed, CreateTime, not transactional, not a
// control batch) — decoded here rather than through
// kgo.ProcessFetchPartition, whose general machinery (pools, aborted
// transactions, decompression, a closure and a batch struct per batch)
// was ~1.5 µs of a one-at-a-time JSON fetch's CPU (BENCHMARKS.md §0,
// "Twenty-fourth pass"). The records are the ones kgo makes, field for
// field (TestDecodePlainIsKgos): the same kbin reads, offsets,
// timestamps, producer fields, nil and empty keys and values, headers,
// the records below the offset asked for skipped the same way, and the
// same next offset. Anything else in the answer — another magic or
// attribute, a CRC that does not match, a record that does not decode,
// a record count the bytes cannot hold — and the whole answer goes to
// kgo, which decides as before (an error included).

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// v2 batch header fields past the ones batches.go names.
const (
	batchLeaderEpochAt = 12
	batchCRCAt         = 17
	batchAttributesAt  = 21
	batchFirstTSAt     = 27
	batchMaxTSAt       = 35
	batchProducerIDAt  = 43
	batchProducerEpAt  = 51
	batchNumRecordsAt  = 57
)

// decodePlain decodes in's record batches for a fetch from offset of
// topic/partition as kgo.ProcessFetchPartition would (read_uncommitted,
// no control records kept), when every whole batch in it is a plain one;
// ok false (nothing decoded) otherwise.
func decodePlain(in []byte, topic string, partition int32, offset int64) (recs []*kgo.Record, next int64, ok bool) {
	// First the headers: every batch must qualify, and the records to
	// keep are counted, so that they take one allocation.
	total := 0
	for rest := in; len(rest) > batchMagicAt+1; {
		length := int32(binary.BigEndian.Uint32(rest[batchLengthAt:])) + batchLogOverhead
		if length < 0 || len(rest) < int(length) {
			break // a partial batch at the end: kgo stops there too
		}
		b := rest[:length]
		rest = rest[length:]
		if length < batchHeaderSize || b[batchMagicAt] != 2 || binary.BigEndian.Uint16(b[batchAttributesAt:]) != 0 {
			return nil, 0, false
		}
		if crc32.Checksum(b[batchAttributesAt:], castagnoli) != binary.BigEndian.Uint32(b[batchCRCAt:]) {
			return nil, 0, false
		}
		n := int32(binary.BigEndian.Uint32(b[batchNumRecordsAt:]))
		if int64(binary.BigEndian.Uint64(b)) == -1 || n < 0 || int(n) > len(b)-batchHeaderSize {
			return nil, 0, false
		}
		total += int(n)
	}
	all := make([]kgo.Record, 0, total)
	cur := offset // kgo's o.Offset: where the next kept record must be
	for len(in) > batchMagicAt+1 {
		length := int32(binary.BigEndian.Uint32(in[batchLengthAt:])) + batchLogOverhead
		if length < 0 || len(in) < int(length) {
			break
		}
		b := in[:length]
		in = in[length:]
		first := int64(binary.BigEndian.Uint64(b))
		last := first + int64(int32(binary.BigEndian.Uint32(b[lastOffsetDeltaAt:])))
		if last < cur {
			continue // wholly below: kgo skips it without a look
		}
		firstTS := int64(binary.BigEndian.Uint64(b[batchFirstTSAt:]))
		producerID := int64(binary.BigEndian.Uint64(b[batchProducerIDAt:]))
		producerEpoch := int16(binary.BigEndian.Uint16(b[batchProducerEpAt:]))
		leaderEpoch := int32(binary.BigEndian.Uint32(b[batchLeaderEpochAt:]))
		n := int(int32(binary.BigEndian.Uint32(b[batchNumRecordsAt:])))
		raw := b[batchHeaderSize:]
		for range n {
			length, used := kbin.Varint(raw)
			size := used + int(length)
			if used <= 0 || length < 0 || len(raw) < size {
				return nil, 0, false // kgo keeps what decoded and does not advance: its call
			}
			r := kbin.Reader{Src: raw[used:size]}
			r.Int8() // record attributes, unused
			tsDelta := r.Varlong()
			offsetDelta := r.Varint()
			key := r.VarintBytes()
			value := r.VarintBytes()
			var headers []kgo.RecordHeader
			if nh := int(r.VarintArrayLen()); nh > 0 {
				headers = make([]kgo.RecordHeader, nh)
				for i := range headers {
					headers[i] = kgo.RecordHeader{Key: r.VarintString(), Value: r.VarintBytes()}
				}
			}
			if !r.Ok() {
				return nil, 0, false
			}
			raw = raw[size:]
			o := first + int64(offsetDelta)
			if o < cur {
				continue
			}
			cur = o + 1
			all = append(all, kgo.Record{
				Key: key, Value: value, Headers: headers, Timestamp: time.Unix(0, (firstTS+tsDelta)*1e6),
				Topic: topic, Partition: partition, ProducerEpoch: producerEpoch, ProducerID: producerID,
				LeaderEpoch: leaderEpoch, Offset: o,
			})
		}
		cur = max(cur, last+1)
	}
	recs = make([]*kgo.Record, len(all))
	for i := range all {
		recs[i] = &all[i]
	}
	return recs, cur, true
}
