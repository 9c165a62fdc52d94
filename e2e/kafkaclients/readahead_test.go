package kafkaclients

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestReadAheadChains: a client far behind, fetching 1 KiB at a time,
// finds its next answers read ahead two deep — the gateway's Fetches to
// Kafka reach exactly two more than the client's, while it waits — and
// never more than two ahead of what the client asked (the memory bound),
// however long it waits. Every answer continues exactly where the one
// before ended (nothing skipped, nothing twice).
func TestReadAheadChains(t *testing.T) {
	const depth = 2 // kafkaproto.aheadDepth
	s := Start(t, Options{Partitions: 1})
	produceDirect(t, s, "orders", 0, 300) // a batch per record, ~70 bytes each
	grant := s.Grant(t, "orders", 0, []string{"fetch"}, time.Minute)

	var sent, upstream, over atomic.Int64
	cluster := s.Kafka.Cluster()
	cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if n := upstream.Add(1); n > sent.Load()+depth { // only the gateway fetches here
			over.Store(n - sent.Load())
		}
		return nil, nil, false
	})
	conn := dialRaw(t, s.KafkaAddrs()[0])
	conn.authenticate("OAUTHBEARER", grant.Capability)
	offset := int64(0)
	for i := range 6 {
		req := fetchOne("orders", 0, offset, 0)
		req.Topics[0].Partitions[0].PartitionMaxBytes = 1 << 10 // about 14 batches
		sent.Add(1)                                             // before sending: the gateway cannot fetch for it earlier
		p := conn.roundTrip(req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
		first, next := batchRange(t, p.RecordBatches)
		if p.ErrorCode != 0 || first > offset || next <= offset {
			t.Fatalf("fetch %d from %d: error %d, batches [%d, %d)", i, offset, p.ErrorCode, first, next)
		}
		offset = next
		sdk.Eventually(t, 10*time.Second, "the read-ahead two deep", func() (bool, string) {
			n := upstream.Load() - sent.Load()
			return n == depth, fmt.Sprintf("%d Fetches to Kafka beyond the client's %d", n, sent.Load())
		})
	}
	if n := over.Load(); n != 0 {
		t.Fatalf("the gateway read %d answers ahead of the client (bound %d)", n, depth)
	}
}

// batchRange is the first base offset and the offset after the last
// whole v2 batch of a record set.
func batchRange(t testing.TB, b []byte) (first, next int64) {
	t.Helper()
	first = -1
	for len(b) >= 61 {
		base := int64(binary.BigEndian.Uint64(b))
		size := 12 + int(binary.BigEndian.Uint32(b[8:]))
		if size > len(b) {
			break
		}
		if first < 0 {
			first = base
		}
		next = base + int64(binary.BigEndian.Uint32(b[23:])) + 1
		b = b[size:]
	}
	return first, next
}
