package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"
)

// onLeader runs do against the current leader of topic/partition. On a
// leader error (stale leader or epoch, unreachable broker) it refreshes
// metadata and tries again with a short backoff, for up to RequestTimeout
// after the first failure and never past ctx. The error is unwrapped;
// callers wrap it once with wrapError.
func (c *Client) onLeader(ctx context.Context, topic string, partition int32, do func(route) error) error {
	var giveUp time.Time
	force := false
	for attempt := 1; ; attempt++ {
		r, err := c.meta.route(ctx, topic, partition, force)
		answered := err == nil
		if answered {
			if err = do(r); err == nil {
				return nil
			}
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if answered && !force && isStaleTopicError(err) {
			// The topic may have been deleted or recreated since we
			// cached it: ask the metadata once before believing it.
			force = true
			continue
		}
		if !isLeaderError(err) {
			return err
		}
		now := time.Now()
		if giveUp.IsZero() {
			giveUp = now.Add(c.cfg.RequestTimeout)
		}
		if now.After(giveUp) {
			return err
		}
		c.log.Debug("leader error, refreshing metadata",
			zap.String("topic", topic), zap.Int32("partition", partition), zap.Int("attempt", attempt), zap.Error(err))
		if err := sleepCtx(ctx, retryBackoff(attempt)); err != nil {
			return err
		}
		force = true
	}
}

// boundedError is wrapError for calls bounded by RequestTimeout: when our
// bound (not the caller's ctx) ran out, the broker did not answer in time,
// which is a retriable REQUEST_TIMED_OUT rather than a context error.
func (c *Client) boundedError(caller context.Context, op string, err error) error {
	if isContextError(err) && caller.Err() == nil {
		err = fmt.Errorf("no answer within %s: %w", c.cfg.RequestTimeout, kerr.RequestTimedOut)
	}
	return wrapError(op, err)
}

// wrapError wraps err once for the public boundary: context errors stay
// context errors (errors.Is(err, context.Canceled)), the rest become a
// *BrokerError, and errors already shaped for callers pass through.
func wrapError(op string, err error) error {
	switch e := err.(type) {
	case nil:
		return nil
	case *OffsetOutOfRangeError, *BrokerError:
		return e
	}
	if isContextError(err) {
		return fmt.Errorf("broker: %s: %w", op, err)
	}
	return newBrokerError(op, err)
}
