package bench

import (
	"bytes"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/internal/stack"
	"github.com/capgate/capgate/internal/timeline"
)

// tracker collects what a rebalance run's members receive (records of
// this run only: keyed with its id), their hook calls, and what the
// producer had acknowledged, into a timeline.Recorder. Safe for
// concurrent use.
type tracker struct {
	runID []byte
	*timeline.Recorder
}

func newTracker(runID string) *tracker {
	return &tracker{runID: []byte(runID), Recorder: timeline.NewRecorder()}
}

// observe records one delivered record (records of other runs are ignored).
func (t *tracker) observe(member string, partition int32, offset int64, key []byte, at time.Time) {
	if bytes.Equal(key, t.runID) {
		t.Deliver(member, partition, offset, at)
	}
}

// startProducer writes one stamped record of this run per partition every
// interval straight to Kafka and records what was acknowledged.
func (t *tracker) startProducer(d *deployment, topic string, partitions int32, interval time.Duration) *stack.Producer {
	return d.StartProducer(stack.ProducerOptions{Topic: topic, Partitions: partitions, Interval: interval, Record: stack.Stamped(t.runID),
		OnAck: func(partition int32, offset int64, _ *kgo.Record, _ time.Time) { t.Acked(partition, offset) }})
}
