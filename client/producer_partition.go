package client

import (
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Partitioner places records as Kafka's default partitioner does, for a
// producer that picks partitions itself (a client credential covers
// every partition of its topics): a keyed record goes to murmur2(key)
// modulo the partition count — franz-go's default partitioner, equal to
// the Java client's, so capgate and Kafka clients put a key on the same
// partition — and records without a key round-robin. capgate produce
// uses it. Safe for concurrent use.
type Partitioner struct {
	keyed kgo.TopicPartitioner // only ever asked about keyed records: a pure hash
	n     int32
	next  atomic.Uint32
}

// NewPartitioner places records over partitions partitions (the topic's
// partition count, at least 1).
func NewPartitioner(partitions int32) (*Partitioner, error) {
	if partitions < 1 {
		return nil, fmt.Errorf("client: partitioner: partitions must be at least 1, got %d", partitions)
	}
	return &Partitioner{keyed: kgo.StickyKeyPartitioner(nil).ForTopic(""), n: partitions}, nil
}

// Partitions is the partition count records are placed over.
func (p *Partitioner) Partitions() int32 { return p.n }

// Partition is the partition of a record with key (nil: no key, the
// next partition round-robin).
func (p *Partitioner) Partition(key []byte) int32 {
	if key != nil {
		return int32(p.keyed.Partition(&kgo.Record{Key: key}, int(p.n)))
	}
	return int32((p.next.Add(1) - 1) % uint32(p.n))
}
