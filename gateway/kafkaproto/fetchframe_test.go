package kafkaproto

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchFrameMatchesKmsg: the hand-written Fetch framing writes
// exactly kmsg's bytes, for every version the listener answers, on
// thousands of random answers (nil, empty, small and large record sets,
// aborted transactions present or not, several topics and partitions).
func TestFetchFrameMatchesKmsg(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 848))
	for i := range 5_000 {
		resp := randomFetchResponse(rng, int16(4+rng.IntN(9)))
		corr := rng.Int32()
		want := appendResponse(nil, corr, resp)
		bufs, ok := fetchFrame(make([]byte, 0, rng.IntN(64)), corr, resp)
		if !ok {
			t.Fatalf("case %d v%d: not framed", i, resp.Version)
		}
		if got := bytes.Join(bufs, nil); !bytes.Equal(got, want) {
			t.Fatalf("case %d v%d: %d bytes, kmsg %d; first difference at %d", i, resp.Version, len(got), len(want), firstDiff(got, want))
		}
	}
}

func TestFetchFrameRefusesWhatItDoesNotWrite(t *testing.T) {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(12)
	p := kmsg.NewFetchResponseTopicPartition()
	p.CurrentLeader.LeaderID = 3
	resp.Topics = []kmsg.FetchResponseTopic{{Topic: "t", Partitions: []kmsg.FetchResponseTopicPartition{p}}}
	if _, ok := fetchFrame(nil, 1, resp); ok {
		t.Fatal("a leader hint was framed (it is never written by hand)")
	}
	resp.SetVersion(13)
	resp.Topics = nil
	if _, ok := fetchFrame(nil, 1, resp); ok {
		t.Fatal("v13 was framed")
	}
}

func randomFetchResponse(rng *rand.Rand, v int16) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(v)
	resp.ThrottleMillis, resp.ErrorCode, resp.SessionID = rng.Int32(), int16(rng.IntN(100)), rng.Int32()
	for range rng.IntN(4) {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = string(make([]byte, rng.IntN(20)))
		for range rng.IntN(5) {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.ErrorCode = rng.Int32(), int16(rng.IntN(120))
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = rng.Int64(), rng.Int64(), rng.Int64()
			p.PreferredReadReplica = rng.Int32()
			if v < 5 {
				p.LogStartOffset = -1
			}
			if v < 11 {
				p.PreferredReadReplica = -1
			}
			switch rng.IntN(3) {
			case 0:
			case 1:
				p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			default:
				for range 1 + rng.IntN(3) {
					p.AbortedTransactions = append(p.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: rng.Int64(), FirstOffset: rng.Int64()})
				}
			}
			switch rng.IntN(4) {
			case 0:
				p.RecordBatches = nil
			case 1:
				p.RecordBatches = []byte{}
			case 2:
				p.RecordBatches = randomBytes(rng, 1+rng.IntN(inlineBatches))
			default:
				p.RecordBatches = randomBytes(rng, inlineBatches+1+rng.IntN(3*inlineBatches))
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
