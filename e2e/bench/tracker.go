package bench

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/broker"
)

// tracker collects what a rebalance run's members receive, their hook
// calls, and what the producer had acknowledged. Safe for concurrent use.
type tracker struct {
	runID []byte // the key of this run's records

	mu         sync.Mutex
	deliveries map[int32][]delivery
	events     map[int32][]ownership
	acked      map[int32][]int64
	lastEvent  time.Time
}

func newTracker(runID string) *tracker {
	return &tracker{
		runID:      []byte(runID),
		deliveries: map[int32][]delivery{},
		events:     map[int32][]ownership{},
		acked:      map[int32][]int64{},
	}
}

// observe records one delivered record (records of other runs are ignored).
func (t *tracker) observe(member string, partition int32, offset int64, key []byte, at time.Time) {
	if !bytes.Equal(key, t.runID) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deliveries[partition] = append(t.deliveries[partition], delivery{At: at, Offset: offset, Member: member})
}

// hook records that member got (held) or gave up partitions at at.
func (t *tracker) hook(member string, partitions []int32, held bool, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range partitions {
		t.events[p] = append(t.events[p], ownership{At: at, Member: member, Held: held})
	}
	if len(partitions) > 0 {
		t.lastEvent = at
	}
}

func (t *tracker) produced(partition int32, offset int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.acked[partition] = append(t.acked[partition], offset)
}

// settled reports whether, since `since`, no partition changed hands,
// members hold every one of partitions exactly once and evenly, and every
// partition was consumed by its holder.
func (t *tracker) settled(partitions int32, members []string, since, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lastEvent.After(since) {
		return false
	}
	counts := map[string]int{}
	for p := range partitions {
		owner := ownerAt(t.events[p], now)
		if owner == "" || !slices.Contains(members, owner) {
			return false
		}
		counts[owner]++
		ds := t.deliveries[p]
		if len(ds) == 0 || ds[len(ds)-1].Member != owner || ds[len(ds)-1].At.Before(since) {
			return false
		}
	}
	floor := int(partitions) / len(members)
	for _, m := range members {
		if n := counts[m]; n < floor || n > floor+1 {
			return false
		}
	}
	return true
}

// drained reports whether every acknowledged offset was delivered.
func (t *tracker) drained() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p, offsets := range t.acked {
		if len(offsets) == 0 {
			continue
		}
		last := offsets[len(offsets)-1]
		if !slices.ContainsFunc(t.deliveries[p], func(d delivery) bool { return d.Offset == last }) {
			return false
		}
	}
	return true
}

// timeline copies what analyze needs.
func (t *tracker) timeline(partitions int32) timeline {
	t.mu.Lock()
	defer t.mu.Unlock()
	tl := timeline{Partitions: partitions, Deliveries: map[int32][]delivery{}, Events: map[int32][]ownership{}, Acked: map[int32][]int64{}}
	for p, ds := range t.deliveries {
		tl.Deliveries[p] = slices.Clone(ds)
	}
	for p, evs := range t.events {
		tl.Events[p] = slices.Clone(evs)
	}
	for p, offsets := range t.acked {
		tl.Acked[p] = slices.Clone(offsets)
	}
	return tl
}

// stampedProducer writes one record per partition every interval straight
// to Kafka, its value the send time in Unix nanoseconds.
type stampedProducer struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	failures atomic.Int64
	once     sync.Once
}

func startProducer(client *broker.Client, topic string, partitions int32, interval time.Duration, tr *tracker) *stampedProducer {
	ctx, cancel := context.WithCancel(context.Background())
	p := &stampedProducer{cancel: cancel}
	for partition := range partitions {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.run(ctx, client, topic, partition, interval, tr)
		}()
	}
	return p
}

func (p *stampedProducer) run(ctx context.Context, client *broker.Client, topic string, partition int32, interval time.Duration, tr *tracker) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			rec := &kgo.Record{Key: tr.runID, Value: strconv.AppendInt(nil, time.Now().UnixNano(), 10), Timestamp: now}
			offset, err := client.Produce(ctx, topic, partition, []*kgo.Record{rec})
			if err != nil {
				if ctx.Err() == nil {
					p.failures.Add(1)
				}
				continue
			}
			tr.produced(partition, offset)
		}
	}
}

// stop ends production and waits for the requests in flight.
func (p *stampedProducer) stop() {
	p.once.Do(func() {
		p.cancel()
		p.wg.Wait()
	})
}
