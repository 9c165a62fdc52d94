package coordinator

import (
	"context"
	"fmt"
	"sync"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/coordinator/group"
)

// withinLogEnd refuses a commit whose offset lies beyond its partition's
// high watermark (416 offset_out_of_range with the latest offset): an
// offset past the log end — int64 max, say — would send every later
// holder of the partition past the data. It asks Kafka only for offsets
// above the cached watermark (offset_cache_ttl); when Kafka cannot say,
// the commit is refused 503 (retriable) rather than stored unchecked.
func (c *Coordinator) withinLogEnd(ctx *fasthttp.RequestCtx, offsets []group.CommitOffset) bool {
	type beyond struct {
		i      int
		latest int64
		err    error
	}
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		first *beyond
		sem   = make(chan struct{}, resolveWorkers)
	)
	for i, o := range offsets {
		if o.Offset < 0 {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			latest, err := c.offsets.latestAtLeast(context.Background(), o.Topic, o.Partition, o.Offset)
			if err == nil && o.Offset <= latest {
				return
			}
			mu.Lock()
			if first == nil || i < first.i {
				first = &beyond{i, latest, err}
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	switch {
	case first == nil:
		return true
	case first.err != nil:
		c.log.Debug("commit: log end unknown", zap.String("topic", offsets[first.i].Topic), zap.Int32("partition", offsets[first.i].Partition), zap.Error(first.err))
		writeError(ctx, api.CodeUnavailable, fmt.Sprintf("offsets[%d]: the log end of %s/%d is unknown: %s",
			first.i, offsets[first.i].Topic, offsets[first.i].Partition, broker.Public(first.err)))
	default:
		o := offsets[first.i]
		writeErrorDetails(ctx, api.CodeOffsetOutOfRange,
			fmt.Sprintf("offsets[%d]: offset %d is beyond the log end of %s/%d (%d)", first.i, o.Offset, o.Topic, o.Partition, first.latest),
			map[string]any{"latest": first.latest})
	}
	return false
}
