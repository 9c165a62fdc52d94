package coordinator

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/capgate/capgate/coordinator/group"
)

// offsetCacheMax bounds the offset cache; past it the cache starts over.
const offsetCacheMax = 100000

// resolveWorkers bounds the offset lookups one request runs at once.
const resolveWorkers = 8

// offsetResolver turns the start-offset sentinels of grants (earliest,
// latest) into offsets, asking Kafka off the event loop, and keeps each
// partition's answer for offset_cache_ttl. Safe for concurrent use.
type offsetResolver struct {
	broker  Broker
	ttl     time.Duration
	timeout time.Duration

	mu    sync.Mutex
	cache map[topicPartition]cachedOffsets
}

type topicPartition struct {
	topic     string
	partition int32
}

type cachedOffsets struct {
	earliest, latest int64
	at               time.Time
}

func newOffsetResolver(b Broker, ttl, timeout time.Duration) *offsetResolver {
	return &offsetResolver{broker: b, ttl: ttl, timeout: timeout, cache: make(map[topicPartition]cachedOffsets)}
}

// lookup returns a partition's earliest and latest offsets.
func (r *offsetResolver) lookup(ctx context.Context, topic string, partition int32) (earliest, latest int64, err error) {
	return r.lookupAbove(ctx, topic, partition, -1)
}

// latestAtLeast returns the partition's latest offset, asking Kafka again
// when the cached one is below offset (the log may have grown since).
func (r *offsetResolver) latestAtLeast(ctx context.Context, topic string, partition int32, offset int64) (int64, error) {
	_, latest, err := r.lookupAbove(ctx, topic, partition, offset)
	return latest, err
}

// lookupAbove is lookup, bypassing a cached answer whose latest offset is
// below floor.
func (r *offsetResolver) lookupAbove(ctx context.Context, topic string, partition int32, floor int64) (earliest, latest int64, err error) {
	key := topicPartition{topic, partition}
	now := time.Now()
	r.mu.Lock()
	c, ok := r.cache[key]
	r.mu.Unlock()
	if ok && now.Sub(c.at) < r.ttl && c.latest >= floor {
		return c.earliest, c.latest, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	earliest, latest, err = r.broker.Offsets(ctx, topic, partition)
	if err != nil {
		return 0, 0, err
	}
	r.mu.Lock()
	if len(r.cache) >= offsetCacheMax {
		clear(r.cache)
	}
	r.cache[key] = cachedOffsets{earliest, latest, now}
	r.mu.Unlock()
	return earliest, latest, nil
}

// resolve replaces the sentinel offsets of grants in place. A grant whose
// lookup fails keeps its sentinel (Kafka's ListOffsets convention: -2
// earliest, -1 latest); the first error is returned for logging.
func (r *offsetResolver) resolve(ctx context.Context, grants []group.Grant) error {
	var todo []int
	for i, g := range grants {
		if g.Offset < 0 {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	var (
		mu    sync.Mutex
		first error
	)
	inParallel(len(todo), func(k int) {
		if err := r.resolveOne(ctx, &grants[todo[k]]); err != nil {
			mu.Lock()
			first = cmp.Or(first, err)
			mu.Unlock()
		}
	})
	return first
}

// inParallel runs fn(0) … fn(n-1) on at most resolveWorkers goroutines
// and returns when every call has.
func inParallel(n int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(resolveWorkers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

func (r *offsetResolver) resolveOne(ctx context.Context, g *group.Grant) error {
	earliest, latest, err := r.lookup(ctx, g.Topic, g.Partition)
	switch {
	case err != nil:
		return err
	case g.Offset == group.OffsetLatest:
		g.Offset = latest
	default:
		g.Offset = earliest
	}
	return nil
}
