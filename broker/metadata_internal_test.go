package broker

import (
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataAnswer is a broker's answer naming topic "bulk" with n
// partitions, all led by broker 1 at leader epoch 1.
func metadataAnswer(n int) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = 1, "127.0.0.1", 9092
	resp.Brokers = append(resp.Brokers, b)
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = kmsg.StringPtr("bulk")
	t.TopicID = [16]byte{1}
	for i := range n {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition, p.Leader, p.LeaderEpoch = int32(i), 1, 1
		t.Partitions = append(t.Partitions, p)
	}
	resp.Topics = append(resp.Topics, t)
	return resp
}

// TestUnchangedMetadataKeepsItsPartitions: the coordinator reads every
// topic every metadata_interval; an answer that says what the cache
// holds keeps the cached partitions (a topic of 10,000 partitions made
// 120 KB of them at each read) under a new load time, and one that
// changes a leader, or comes in another order, is taken whole — the
// earlier snapshot untouched.
func TestUnchangedMetadataKeepsItsPartitions(t *testing.T) {
	const n = 10_000
	m := &metadataCache{flights: map[string]*flight{}}
	m.snap.Store(&metaSnapshot{topics: map[string]*topicMeta{}, brokers: map[int32]string{}})
	m.store(metadataAnswer(n))
	first := m.snap.Load().topics["bulk"]

	again := metadataAnswer(n)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m.store(again)
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<10 {
		t.Errorf("storing an unchanged answer of %d partitions allocated %d bytes", n, grew)
	}
	second := m.snap.Load().topics["bulk"]
	if second == first || second.loadedAt.Before(first.loadedAt) || len(second.partitions) != n {
		t.Fatalf("unchanged answer: entry %p loaded %v with %d partitions, before %p loaded %v", second, second.loadedAt, len(second.partitions), first, first.loadedAt)
	}

	moved := metadataAnswer(n)
	moved.Topics[0].Partitions[7].Leader = 2
	m.store(moved)
	third := m.snap.Load().topics["bulk"]
	if third.partitions[7].leader != 2 || second.partitions[7].leader != 1 {
		t.Fatalf("partition 7's leader moved to 2: cache says %d, the earlier snapshot %d (want 2 and 1)", third.partitions[7].leader, second.partitions[7].leader)
	}

	shuffled := metadataAnswer(n)
	ps := shuffled.Topics[0].Partitions
	ps[0], ps[1] = ps[1], ps[0]
	ps[1].Leader = 3 // partition 0, listed second
	m.store(shuffled)
	fourth := m.snap.Load().topics["bulk"]
	if fourth.partitions[0].leader != 3 || fourth.partitions[1].leader != 1 || fourth.partitions[7].leader != 1 {
		t.Fatalf("an answer out of order: partitions 0, 1, 7 led by %d, %d, %d; want 3, 1, 1",
			fourth.partitions[0].leader, fourth.partitions[1].leader, fourth.partitions[7].leader)
	}
}
