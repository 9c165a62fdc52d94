package stack

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ProducerOptions configure StartProducer.
type ProducerOptions struct {
	Topic      string
	Partitions int32
	// Interval between two records of one partition (default 10ms).
	Interval time.Duration
	// Record makes partition's seq-th record at now (default: value
	// "p<partition>-<seq>", six digits).
	Record func(partition int32, seq int, now time.Time) *kgo.Record
	// Send produces one record and returns its offset (default: the
	// stack's Kafka client, acks=all).
	Send func(ctx context.Context, partition int32, rec *kgo.Record) (int64, error)
	// OnAck is called for every acknowledged record, with the time of the
	// acknowledgement.
	OnAck func(partition int32, offset int64, rec *kgo.Record, at time.Time)
}

// Producer writes one record per partition every interval, one goroutine
// per partition, until Stop. Failed produces are counted, not retried:
// the acknowledged records (OnAck) are what must be delivered. Safe for
// concurrent use.
type Producer struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	mu       sync.Mutex
	count    int
	failures int
	lastErr  error
}

// StartProducer starts producing to the stack's Kafka (or through
// opts.Send).
func (s *Stack) StartProducer(opts ProducerOptions) *Producer {
	if opts.Send == nil {
		opts.Send = func(ctx context.Context, partition int32, rec *kgo.Record) (int64, error) {
			return s.Broker.Produce(ctx, opts.Topic, partition, []*kgo.Record{rec})
		}
	}
	return StartProducer(opts)
}

// StartProducer starts producing through opts.Send.
func StartProducer(opts ProducerOptions) *Producer {
	if opts.Interval <= 0 {
		opts.Interval = 10 * time.Millisecond
	}
	if opts.Record == nil {
		opts.Record = func(partition int32, seq int, _ time.Time) *kgo.Record {
			return &kgo.Record{Value: fmt.Appendf(nil, "p%d-%06d", partition, seq)}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Producer{cancel: cancel}
	for partition := range opts.Partitions {
		p.wg.Add(1)
		go p.run(ctx, opts, partition)
	}
	return p
}

func (p *Producer) run(ctx context.Context, opts ProducerOptions, partition int32) {
	defer p.wg.Done()
	tick := time.NewTicker(opts.Interval)
	defer tick.Stop()
	for seq := 0; ; seq++ {
		rec := opts.Record(partition, seq, time.Now())
		// Not ctx: a produce abandoned by Stop could still land in Kafka
		// after the caller read the log's end.
		callCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		offset, err := opts.Send(callCtx, partition, rec)
		cancel()
		at := time.Now()
		p.mu.Lock()
		if err == nil {
			p.count++
		} else {
			p.failures++
			p.lastErr = err
		}
		p.mu.Unlock()
		if err == nil && opts.OnAck != nil {
			opts.OnAck(partition, offset, rec, at)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Stop stops producing and waits for the produce calls in flight.
func (p *Producer) Stop() {
	p.once.Do(func() {
		p.cancel()
		p.wg.Wait()
	})
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

// Stamped makes ProducerOptions.Record write records keyed with runID
// (so a run recognises its own records in a topic that outlived earlier
// runs) whose value and timestamp are their send time (Unix nanoseconds).
func Stamped(runID []byte) func(partition int32, seq int, now time.Time) *kgo.Record {
	return func(_ int32, _ int, now time.Time) *kgo.Record {
		return &kgo.Record{Key: runID, Value: strconv.AppendInt(nil, now.UnixNano(), 10), Timestamp: now}
	}
}
