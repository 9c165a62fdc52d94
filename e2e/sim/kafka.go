package sim

import (
	"time"

	"github.com/capgate/capgate/client/session"
	"github.com/capgate/capgate/coordinator/group"
)

// kafka models the brokers: one append-only log per partition, no
// retention (earliest is always 0), a producer writing uniquely numbered
// records, and fetches that long-poll until a record exists at their
// offset or their wait ends.
type kafka struct {
	w       *World
	parts   []session.Partition
	index   map[session.Partition]int
	logs    [][]int64 // record values by offset
	waiters [][]*brokerWait
	next    int64 // the next record value
	stopped bool  // the producer stopped (drain phase)
}

// brokerWait is a fetch waiting for a record; answer runs once.
type brokerWait struct {
	done   bool
	answer func()
}

func newKafka(w *World) *kafka {
	k := &kafka{w: w, index: map[session.Partition]int{}}
	for i, topic := range w.prof.topics {
		for p := range w.prof.partitions[i] {
			k.add(session.Partition{Topic: topic, Partition: p})
		}
	}
	return k
}

func (k *kafka) add(id session.Partition) {
	k.index[id] = len(k.parts)
	k.parts = append(k.parts, id)
	k.logs = append(k.logs, nil)
	k.waiters = append(k.waiters, nil)
}

// grow adds n partitions to topic i, as an operator would; the
// coordinator learns it from its next metadata read.
func (k *kafka) grow(i, n int) {
	topic := k.w.prof.topics[i]
	for range n {
		id := session.Partition{Topic: topic, Partition: k.w.prof.partitions[i]}
		k.w.prof.partitions[i]++
		k.add(id)
		k.w.check.addPartition(id)
	}
	k.w.tracef("topic %s grew to %d partitions", topic, k.w.prof.partitions[i])
}

// fetch asks the leader of part for records at offset; answer runs when
// the broker replies: at once (after its latency) when a record exists or
// the offset is out of range, else when one is produced or maxWait ends.
func (k *kafka) fetch(part int, offset int64, maxWait time.Duration, node int, answer func()) {
	wait := &brokerWait{answer: answer}
	if offset != int64(len(k.logs[part])) || maxWait <= 0 {
		k.reply(wait, node)
		return
	}
	k.waiters[part] = append(k.waiters[part], wait)
	k.w.after(maxWait, evBroker, node, func() { k.fire(wait) })
}

func (k *kafka) reply(wait *brokerWait, node int) {
	k.w.after(k.w.between(50*time.Microsecond, k.w.prof.brokerLatency), evBroker, node, func() { k.fire(wait) })
}

func (k *kafka) fire(wait *brokerWait) {
	if !wait.done {
		wait.done = true
		wait.answer()
	}
}

// read returns the values of up to maxRecords records from offset and the
// next offset; ok is false when offset is outside [0, end].
func (k *kafka) read(part int, offset int64, maxRecords int) (values []int64, next int64, ok bool) {
	log := k.logs[part]
	if offset < 0 || offset > int64(len(log)) {
		return nil, offset, false
	}
	end := min(int64(len(log)), offset+int64(maxRecords))
	return log[offset:end:end], end, true
}

// end is the log end offset of part.
func (k *kafka) end(part int) int64 { return int64(len(k.logs[part])) }

// startProducer schedules the first burst.
func (k *kafka) startProducer() {
	k.w.after(k.w.exponential(k.w.prof.produceEvery), evProduce, -1, k.produce)
}

// produce appends a burst of records to one partition and wakes the
// fetches waiting on it.
func (k *kafka) produce() {
	if k.stopped {
		return
	}
	w := k.w
	part := w.rng.IntN(len(k.parts))
	for range 1 + w.rng.IntN(w.prof.produceBurst) {
		k.logs[part] = append(k.logs[part], k.next)
		k.next++
		w.stats.Records++
	}
	waiters := k.waiters[part]
	k.waiters[part] = nil
	for _, wait := range waiters {
		if !wait.done {
			k.reply(wait, -1)
		}
	}
	k.startProducer()
}

// resolve turns Kafka's sentinels (-2 earliest, -1 latest) into the
// partition's log start or end; other offsets are kept.
func (k *kafka) resolve(topic string, partition int32, offset int64) int64 {
	switch offset {
	case group.OffsetEarliest:
		return 0
	case group.OffsetLatest:
		return k.end(k.index[partitionOf(topic, partition)])
	}
	return offset
}

// simResolver resolves grants' start offsets against the simulated Kafka
// (driver.Resolver), as the coordinator asks the brokers.
type simResolver struct{ k *kafka }

func (r simResolver) Resolve(grants []group.Grant) error {
	for i, g := range grants {
		grants[i].Offset = r.k.resolve(g.Topic, g.Partition, g.Offset)
	}
	return nil
}
