package kafkaproto

import (
	"encoding/binary"
	"net"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchFrame frames a Fetch answer (v4–v12) as buffers for one writev,
// the record batches referenced in place rather than copied: Fetch answers
// are megabytes of batches, and kmsg's AppendTo would copy each of them
// once more on its way from Kafka to the client. Hand-written for that
// reason only; it writes exactly kmsg's bytes (TestFetchFrameMatchesKmsg
// checks that on random answers) for the answers this listener builds:
// no tagged fields and no leader hints. ok is false for any other answer
// (encode those with appendResponse).
func fetchFrame(scratch []byte, correlation int32, resp *kmsg.FetchResponse) (net.Buffers, bool) {
	v := resp.Version
	if v < 4 || v > 12 || resp.UnknownTags.Len() > 0 || len(resp.Brokers) > 0 {
		return nil, false
	}
	flex := v >= 12
	w := frameWriter{cur: scratch[:0]}
	w.cur = append(w.cur, 0, 0, 0, 0) // size, patched below
	w.cur = binary.BigEndian.AppendUint32(w.cur, uint32(correlation))
	if flex {
		w.cur = append(w.cur, 0) // response header tags
	}
	w.cur = binary.BigEndian.AppendUint32(w.cur, uint32(resp.ThrottleMillis))
	if v >= 7 {
		w.cur = binary.BigEndian.AppendUint16(w.cur, uint16(resp.ErrorCode))
		w.cur = binary.BigEndian.AppendUint32(w.cur, uint32(resp.SessionID))
	}
	w.arrayLen(len(resp.Topics), flex)
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.UnknownTags.Len() > 0 {
			return nil, false
		}
		w.str(t.Topic, flex)
		w.arrayLen(len(t.Partitions), flex)
		for j := range t.Partitions {
			if !w.partition(&t.Partitions[j], v, flex) {
				return nil, false
			}
		}
		if flex {
			w.cur = append(w.cur, 0)
		}
	}
	if flex {
		w.cur = append(w.cur, 0)
	}
	bufs := w.finish()
	size := 0
	for _, b := range bufs {
		size += len(b)
	}
	binary.BigEndian.PutUint32(bufs[0], uint32(size-4))
	return bufs, true
}

// frameWriter appends to cur and cuts a buffer out around every large
// record set.
type frameWriter struct {
	bufs net.Buffers
	cur  []byte
}

// inlineBatches: record sets up to this size are copied, larger ones
// referenced (a writev entry costs about as much as a small copy).
const inlineBatches = 4 << 10

func (w *frameWriter) partition(p *kmsg.FetchResponseTopicPartition, v int16, flex bool) bool {
	if p.UnknownTags.Len() > 0 || p.DivergingEpoch.Epoch != -1 || p.DivergingEpoch.EndOffset != -1 || p.DivergingEpoch.UnknownTags.Len() > 0 ||
		p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1 || p.CurrentLeader.UnknownTags.Len() > 0 ||
		p.SnapshotID.EndOffset != -1 || p.SnapshotID.Epoch != -1 || p.SnapshotID.UnknownTags.Len() > 0 {
		return false // tagged fields: never set by this listener
	}
	w.cur = binary.BigEndian.AppendUint32(w.cur, uint32(p.Partition))
	w.cur = binary.BigEndian.AppendUint16(w.cur, uint16(p.ErrorCode))
	w.cur = binary.BigEndian.AppendUint64(w.cur, uint64(p.HighWatermark))
	w.cur = binary.BigEndian.AppendUint64(w.cur, uint64(p.LastStableOffset))
	if v >= 5 {
		w.cur = binary.BigEndian.AppendUint64(w.cur, uint64(p.LogStartOffset))
	}
	if p.AbortedTransactions == nil {
		w.nullLen(flex)
	} else {
		w.arrayLen(len(p.AbortedTransactions), flex)
	}
	for _, a := range p.AbortedTransactions {
		if a.UnknownTags.Len() > 0 {
			return false
		}
		w.cur = binary.BigEndian.AppendUint64(w.cur, uint64(a.ProducerID))
		w.cur = binary.BigEndian.AppendUint64(w.cur, uint64(a.FirstOffset))
		if flex {
			w.cur = append(w.cur, 0)
		}
	}
	if v >= 11 {
		w.cur = binary.BigEndian.AppendUint32(w.cur, uint32(p.PreferredReadReplica))
	}
	w.bytes(p.RecordBatches, flex)
	if flex {
		w.cur = append(w.cur, 0)
	}
	return true
}

func (w *frameWriter) arrayLen(n int, flex bool) {
	if flex {
		w.cur = kbin.AppendUvarint(w.cur, uint32(n+1))
		return
	}
	w.cur = binary.BigEndian.AppendUint32(w.cur, uint32(n))
}

func (w *frameWriter) nullLen(flex bool) {
	if flex {
		w.cur = append(w.cur, 0)
		return
	}
	w.cur = binary.BigEndian.AppendUint32(w.cur, 0xffffffff)
}

func (w *frameWriter) str(s string, flex bool) {
	if flex {
		w.cur = kbin.AppendUvarint(w.cur, uint32(len(s)+1))
	} else {
		w.cur = binary.BigEndian.AppendUint16(w.cur, uint16(len(s)))
	}
	w.cur = append(w.cur, s...)
}

// bytes writes nullable bytes: its length, then the bytes themselves,
// copied when small, referenced when large.
func (w *frameWriter) bytes(b []byte, flex bool) {
	switch {
	case b == nil:
		w.nullLen(flex)
		return
	case flex:
		w.cur = kbin.AppendUvarint(w.cur, uint32(len(b)+1))
	default:
		w.cur = binary.BigEndian.AppendUint32(w.cur, uint32(len(b)))
	}
	if len(b) <= inlineBatches {
		w.cur = append(w.cur, b...)
		return
	}
	w.bufs = append(w.bufs, w.cur, b)
	w.cur = w.cur[len(w.cur):] // the scratch's rest, for what follows
}

func (w *frameWriter) finish() net.Buffers {
	return append(w.bufs, w.cur)
}
