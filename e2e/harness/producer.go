package harness

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/internal/stack"
)

// Producer writes uniquely numbered records ("p<partition>-<seq>") to
// every partition of the cluster's topic, straight to Kafka, one goroutine
// per partition (stack.Producer), and logs each acknowledged record
// (Produced) with the offset Kafka gave it. Failed produces are counted,
// not retried.
type Producer = stack.Producer

// StartProducer produces one record per partition every interval until
// Stop (or cleanup).
func (c *Cluster) StartProducer(t testing.TB, interval time.Duration) *Producer {
	t.Helper()
	p := c.Stack.StartProducer(stack.ProducerOptions{Topic: c.opts.Topic, Partitions: c.opts.Partitions, Interval: interval,
		OnAck: func(partition int32, offset int64, rec *kgo.Record, at time.Time) {
			c.Log.AddProduced(Produced{Topic: c.opts.Topic, Partition: partition, Offset: offset, Value: string(rec.Value), At: Now()})
		}})
	cleanup(t, "producer", p.Stop)
	return p
}

// Undelivered counts the produced records not yet delivered to group and
// names the first partition behind.
func (l *Log) Undelivered(group string) (int, string) {
	n, first, _ := l.undelivered(group)
	return n, first
}

func (l *Log) undelivered(group string) (int, string, PartitionKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	type offsetKey struct {
		topic     string
		partition int32
		offset    int64
	}
	seen := make(map[offsetKey]bool, len(l.s.Deliveries))
	for _, d := range l.s.Deliveries {
		if d.Key.Group == group {
			seen[offsetKey{d.Key.Topic, d.Key.Partition, d.Offset}] = true
		}
	}
	missing, first, key := 0, "", PartitionKey{}
	for _, p := range l.s.Produced {
		if !seen[offsetKey{p.Topic, p.Partition, p.Offset}] {
			if missing == 0 {
				first = fmt.Sprintf("%s/%d offset %d", p.Topic, p.Partition, p.Offset)
				key = PartitionKey{Group: group, Topic: p.Topic, Partition: p.Partition}
			}
			missing++
		}
	}
	return missing, first, key
}

// WaitDelivered waits until every record produced so far was delivered
// to group. On timeout it fails t with the checkers' findings and what the
// log holds about the first partition behind.
func (c *Cluster) WaitDelivered(t testing.TB, group string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		n, first, key := c.Log.undelivered(group)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			s := c.Log.Snapshot()
			for _, v := range CheckAll(s, c.Params()) {
				t.Logf("invariant violated: %s", v)
			}
			t.Fatalf("timed out after %v: %d records never delivered to %s, first %s\n%s", timeout, n, group, first, s.Explain(key, 15))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
