package client

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/client/session"
)

// Close revokes every partition (OnRevoke, final commit with release),
// leaves the group and stops. If ctx ends while Close runs, everything is
// cut short and ctx's error returned: nothing more is committed, and the
// coordinator drops the member after its session_timeout.
//
// A ctx that had already ended when Close was called is not taken as "cut
// everything short": Close then closes within Config.RequestTimeout (10 s
// by default) of its own, logs at info that it did, and returns the
// close's outcome. That ctx is nearly always the one the poll loop ran
// under (signal.NotifyContext ended it on Ctrl-C, which is what ended the
// loop), and honouring it would commit nothing: every record processed
// since the last timed commit would be delivered again, to whoever holds
// the partition next, on every deploy — the mistake Kafka's own clients
// do not let you make (their Close always commits and leaves). Pass Close
// a context of its own to choose the bound, e.g.
// context.WithTimeout(context.Background(), 10*time.Second). A hook's ctx
// is the exception (Close must not be called from a hook): it is honoured
// as given.
func (c *Consumer) Close(ctx context.Context) error {
	if ctx.Err() != nil && ctx.Value(hookContext{}) == nil {
		return c.closeAnyway(ctx)
	}
	return c.close(ctx)
}

// closeAnyway closes within request_timeout although ctx had ended
// before Close was called (see Close).
func (c *Consumer) closeAnyway(ended context.Context) error {
	c.mu.Lock()
	joined := c.joined && !c.stopped
	c.mu.Unlock()
	if !joined {
		return c.close(ended) // nothing to commit or leave
	}
	bound := c.cfg.RequestTimeout
	c.log.Info("close: the context passed to Close had already ended; closing within request_timeout anyway "+
		"(pass Close a context of its own, e.g. context.WithTimeout(context.Background(), 10*time.Second))",
		zap.NamedError("context", context.Cause(ended)), zap.Duration("request_timeout", bound))
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ended), bound)
	defer cancel()
	if err := c.close(ctx); err != nil {
		return fmt.Errorf("client: close: the context passed to Close had already ended (%v), so Close took request_timeout (%s) of its own, and that ran out: %w",
			context.Cause(ended), bound, err)
	}
	return nil
}

// exited is closed once every goroutine of the stopped consumer ended;
// then the fetch pool's connections are given back (the last consumer
// using them closes them).
func (c *Consumer) exited() <-chan struct{} {
	c.exitOnce.Do(func() {
		c.exit = make(chan struct{})
		go func() {
			c.wg.Wait()
			c.fetcher.wait()
			c.letGo()
			close(c.exit)
		}()
	})
	return c.exit
}

// hookContext marks the contexts handed to hooks (see Close).
type hookContext struct{}

func (c *Consumer) close(ctx context.Context) error {
	c.mu.Lock()
	if c.joined {
		c.carry(c.d.User(session.CloseRequested{Now: time.Now()}))
	} else {
		c.stopLocked()
	}
	c.mu.Unlock()
	select {
	case <-c.done:
	case <-ctx.Done():
		c.mu.Lock()
		c.stopLocked()
		c.mu.Unlock()
		c.exited()
		return ctx.Err()
	}
	exited := c.exited()
	select {
	case <-exited:
	case <-ctx.Done():
		return ctx.Err()
	}
	if c.opts.ownHTTP {
		// Fetches ahead and long polls leave spare keep-alive
		// connections; every request has ended now.
		c.opts.http.CloseIdleConnections()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fatal != nil {
		return c.fatal
	}
	return c.leaveErr
}
