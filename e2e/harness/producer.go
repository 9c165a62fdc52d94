package harness

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Producer writes uniquely numbered records ("p<partition>-<seq>") to
// every partition of the cluster's topic, straight to Kafka, one goroutine
// per partition, and logs each acknowledged record (Produced) with the
// offset Kafka gave it. Failed produces are counted, not retried.
type Producer struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	count    int
	failures int
	lastErr  error
}

// StartProducer produces one record per partition every interval until
// Stop (or cleanup).
func (c *Cluster) StartProducer(t testing.TB, interval time.Duration) *Producer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &Producer{cancel: cancel}
	for part := range c.opts.Partitions {
		p.wg.Add(1)
		go p.run(ctx, c, part, interval)
	}
	cleanup(t, "producer", p.Stop)
	return p
}

func (p *Producer) run(ctx context.Context, c *Cluster, part int32, interval time.Duration) {
	defer p.wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for seq := 0; ; seq++ {
		value := fmt.Sprintf("p%d-%06d", part, seq)
		// Not ctx: a produce abandoned by Stop could still land in Kafka.
		callCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		offset, err := c.Broker.Produce(callCtx, c.opts.Topic, part, []*kgo.Record{{Value: []byte(value)}})
		cancel()
		p.mu.Lock()
		if err == nil {
			p.count++
			c.Log.AddProduced(Produced{Topic: c.opts.Topic, Partition: part, Offset: offset, Value: value, At: Now()})
		} else {
			p.failures++
			p.lastErr = err
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Stop stops producing and waits for the produce calls in flight.
func (p *Producer) Stop() {
	p.cancel()
	p.wg.Wait()
}

// Count is the number of acknowledged records.
func (p *Producer) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}

// Failures is the number of failed produce calls and the last error.
func (p *Producer) Failures() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failures, p.lastErr
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
