package client

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/client/session"
)

// Decoding raw record batches (Kafka's v2 format) straight into the SDK's
// Records.
//
// Why not only kgo.ProcessFetchPartition: it allocates a *kgo.Record (a
// quarter of a kilobyte with its context and fields) per record, which
// decodeRaw then copied into a Record; on one consumer reading 100-byte
// records that allocation and copy, and the garbage collection behind
// them, were two thirds of the SDK's CPU (BENCHMARKS.md §0). This decoder
// allocates one []Record per batch, and keys, values and header values
// alias the (decompressed) batch. Decompression is still kgo's, and
// batches of the old formats (magic 0 and 1, before Kafka 0.11) still go
// through kgo.ProcessFetchPartition. TestBatchDecoderMatchesKgo checks it
// against kgo on random batches.

// Record batch v2 header layout.
const (
	rbLengthAt     = 8  // batchLength counts the bytes after itself
	rbMagicAt      = 16 // magic, at the same place in every format
	rbCRCAt        = 17 // CRC-32C of attributes..end
	rbAttributesAt = 21
	rbLastDeltaAt  = 23
	rbBaseTimeAt   = 27
	rbMaxTimeAt    = 35
	rbCountAt      = 57
	rbHeaderSize   = 61
	rbOverhead     = 12 // baseOffset + batchLength

	rbCodecMask     = 0x07
	rbLogAppendTime = 0x08
	rbControl       = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errBadBatch is a batch that does not parse.
var errBadBatch = errors.New("malformed record batch")

// batchDecoder decodes one fetch answer's batches for one fetch.
type batchDecoder struct {
	req          session.Fetch
	decompressor kgo.Decompressor
	res          fetched
}

// decodeBatches reads the whole batches of in, keeping the records at or
// after req.Offset; next is after the last batch read (at least
// req.Offset), control batches included. A trailing partial batch is
// ignored, as Kafka cuts an answer at its byte budget.
func decodeBatches(in []byte, req session.Fetch, decompressor kgo.Decompressor) (fetched, error) {
	d := batchDecoder{req: req, decompressor: decompressor, res: fetched{next: req.Offset}}
	d.res.records = make([]Record, 0, countRecords(in))
	for len(in) > rbMagicAt {
		length := int64(int32(binary.BigEndian.Uint32(in[rbLengthAt:])))
		end := rbOverhead + length
		if length < 0 || end > int64(len(in)) {
			break
		}
		batch := in[:end]
		in = in[end:]
		var err error
		if batch[rbMagicAt] == 2 {
			err = d.batch(batch)
		} else {
			err = d.legacy(batch)
		}
		if err != nil {
			return fetched{}, err
		}
	}
	return d.res, nil
}

// countRecords is the number of records the v2 batch headers of in
// announce (bounded by the bytes there are), so that one slice holds them.
func countRecords(in []byte) int {
	total := 0
	for len(in) >= rbHeaderSize {
		length := int64(int32(binary.BigEndian.Uint32(in[rbLengthAt:])))
		end := rbOverhead + length
		if length < 0 || end > int64(len(in)) {
			break
		}
		if in[rbMagicAt] == 2 && binary.BigEndian.Uint16(in[rbAttributesAt:])&rbControl == 0 {
			total += int(min(max(int32(binary.BigEndian.Uint32(in[rbCountAt:])), 0), int32(end)))
		}
		in = in[end:]
	}
	return total
}

// batch decodes one v2 batch.
func (d *batchDecoder) batch(b []byte) error {
	if len(b) < rbHeaderSize {
		return errBadBatch
	}
	if crc32.Checksum(b[rbAttributesAt:], castagnoli) != binary.BigEndian.Uint32(b[rbCRCAt:]) {
		return fmt.Errorf("record batch at offset %d: CRC mismatch", int64(binary.BigEndian.Uint64(b)))
	}
	base := int64(binary.BigEndian.Uint64(b))
	attrs := binary.BigEndian.Uint16(b[rbAttributesAt:])
	last := base + int64(int32(binary.BigEndian.Uint32(b[rbLastDeltaAt:])))
	d.res.next = max(d.res.next, last+1)
	if attrs&rbControl != 0 || last < d.req.Offset {
		return nil // transaction markers, or nothing at or after the offset
	}
	count := int(int32(binary.BigEndian.Uint32(b[rbCountAt:])))
	body, err := d.decompressor.Decompress(b[rbHeaderSize:], kgo.CompressionCodecType(attrs&rbCodecMask))
	if err != nil {
		return fmt.Errorf("record batch at offset %d: %w", base, err)
	}
	baseTime := int64(binary.BigEndian.Uint64(b[rbBaseTimeAt:]))
	logAppend := attrs&rbLogAppendTime != 0
	if logAppend {
		baseTime = int64(binary.BigEndian.Uint64(b[rbMaxTimeAt:]))
	}
	if count < 0 || count > len(body) { // every record takes at least one byte
		return errBadBatch
	}
	for range count {
		// Decode in place: a Record holds pointers, so copying one in
		// costs write barriers.
		n := len(d.res.records)
		if n == cap(d.res.records) {
			d.res.records = append(d.res.records, Record{})[:n]
		}
		d.res.records = d.res.records[:n+1]
		r := &d.res.records[n]
		var timeDelta, offsetDelta int64
		if body, timeDelta, offsetDelta, err = readRecord(body, r); err != nil {
			return fmt.Errorf("record batch at offset %d: %w", base, err)
		}
		r.Offset = base + offsetDelta
		if r.Offset < d.req.Offset {
			*r = Record{}
			d.res.records = d.res.records[:n]
			continue
		}
		if !logAppend {
			timeDelta += baseTime
		} else {
			timeDelta = baseTime
		}
		r.Topic, r.Partition, r.Epoch = d.req.Partition.Topic, d.req.Partition.Partition, d.req.Epoch
		r.Timestamp = time.UnixMilli(timeDelta)
		d.res.bytes += r.size()
	}
	return nil
}

// readRecord parses one record of a v2 batch into r (key, value and
// headers alias b) and returns the rest of b and the record's deltas.
func readRecord(b []byte, r *Record) (rest []byte, timeDelta, offsetDelta int64, err error) {
	length, n := binary.Varint(b)
	if n <= 0 || length < 0 || int64(len(b)-n) < length {
		return nil, 0, 0, errBadBatch
	}
	rec, rest := b[n:n+int(length)], b[n+int(length):]
	if len(rec) < 1 {
		return nil, 0, 0, errBadBatch
	}
	rec = rec[1:] // attributes, unused
	var ok bool
	if timeDelta, rec, ok = varint(rec); !ok {
		return nil, 0, 0, errBadBatch
	}
	if offsetDelta, rec, ok = varint(rec); !ok {
		return nil, 0, 0, errBadBatch
	}
	if r.Key, rec, ok = varintBytes(rec); !ok {
		return nil, 0, 0, errBadBatch
	}
	if r.Value, rec, ok = varintBytes(rec); !ok {
		return nil, 0, 0, errBadBatch
	}
	headers, rec, ok := varint(rec)
	if !ok || headers < 0 || headers > int64(len(rec)) {
		return nil, 0, 0, errBadBatch
	}
	if headers > 0 {
		r.Headers = make([]Header, headers)
		for i := range r.Headers {
			var key []byte
			if key, rec, ok = varintBytes(rec); !ok {
				return nil, 0, 0, errBadBatch
			}
			r.Headers[i].Key = string(key)
			if r.Headers[i].Value, rec, ok = varintBytes(rec); !ok {
				return nil, 0, 0, errBadBatch
			}
		}
	}
	return rest, timeDelta, offsetDelta, nil
}

func varint(b []byte) (int64, []byte, bool) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, nil, false
	}
	return v, b[n:], true
}

// varintBytes reads a varint length and that many bytes; -1 is null.
func varintBytes(b []byte) ([]byte, []byte, bool) {
	n, b, ok := varint(b)
	switch {
	case !ok || n < -1 || n > int64(len(b)):
		return nil, nil, false
	case n == -1:
		return nil, b, true
	}
	return b[:n:n], b[n:], true
}

// legacy decodes a message set of the old formats (magic 0 or 1) with kgo.
func (d *batchDecoder) legacy(b []byte) error {
	part := &kmsg.FetchResponseTopicPartition{Partition: d.req.Partition.Partition, RecordBatches: b}
	opts := kgo.ProcessFetchPartitionOpts{Offset: d.req.Offset, Topic: d.req.Partition.Topic, Partition: d.req.Partition.Partition}
	fp, parsed := kgo.ProcessFetchPartition(opts, part, d.decompressor, nil)
	if fp.Err != nil {
		return fmt.Errorf("decode record batches: %w", fp.Err)
	}
	d.res.next = max(d.res.next, parsed)
	for _, k := range fp.Records {
		r := Record{
			Topic: d.req.Partition.Topic, Partition: d.req.Partition.Partition, Offset: k.Offset,
			Timestamp: k.Timestamp, Key: k.Key, Value: k.Value, Epoch: d.req.Epoch,
		}
		for _, h := range k.Headers {
			r.Headers = append(r.Headers, Header{Key: h.Key, Value: h.Value})
		}
		d.res.bytes += r.size()
		d.res.records = append(d.res.records, r)
		d.res.next = max(d.res.next, k.Offset+1)
	}
	return nil
}
