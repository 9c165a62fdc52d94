package client

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/client/session"
)

// timerLoop steps Tick at the driver's deadline (retries, request
// timeouts, the session's own deadlines).
func (c *Consumer) timerLoop() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		c.mu.Lock()
		deadline := c.d.NextDeadline()
		c.armed = deadline
		c.mu.Unlock()
		var fire <-chan time.Time
		if !deadline.IsZero() {
			timer.Reset(time.Until(deadline))
			fire = timer.C
		}
		select {
		case <-c.ctx.Done():
			timer.Stop()
			return
		case <-c.timeWake:
		case <-fire:
			c.mu.Lock()
			c.carry(c.d.Tick(time.Now()))
			c.mu.Unlock()
		}
		timer.Stop()
	}
}

// rearmLocked wakes the timer loop when the driver's deadline moved
// earlier than the one it waits for.
func (c *Consumer) rearmLocked() {
	d := c.d.NextDeadline()
	if !d.IsZero() && (c.armed.IsZero() || d.Before(c.armed)) {
		c.armed = d
		wake(c.timeWake)
	}
}

// hookCall is one queued user hook.
type hookCall struct {
	revoke session.CallRevoke
	grant  []Partition
}

func (c *Consumer) queueHookLocked(h hookCall) {
	if len(h.grant) > 0 {
		c.log.Info("partitions granted", zap.Stringers("partitions", h.grant))
	} else {
		c.log.Info("partitions revoked", zap.Stringers("partitions", h.revoke.Partitions), zap.Bool("lost", h.revoke.Lost))
	}
	c.hooks = append(c.hooks, h)
	wake(c.hookWake)
}

// hookLoop runs the user's hooks one at a time, in the order the session
// asked for them, so a revoke and a later grant of one partition are
// never seen out of order.
func (c *Consumer) hookLoop() {
	for {
		c.mu.Lock()
		if len(c.hooks) == 0 {
			c.mu.Unlock()
			select {
			case <-c.hookWake:
				continue
			case <-c.ctx.Done():
				return
			}
		}
		h := c.hooks[0]
		c.hooks = c.hooks[1:]
		c.mu.Unlock()
		c.runHook(h)
	}
}

func (c *Consumer) runHook(h hookCall) {
	switch {
	case len(h.grant) > 0:
		if c.opts.onGrant != nil {
			c.opts.onGrant(h.grant)
		}
	case h.revoke.Lost:
		if c.opts.onLost != nil {
			c.opts.onLost(h.revoke.Partitions)
		} else if c.opts.onRevoke != nil {
			ctx, cancel := context.WithCancel(context.WithValue(c.ctx, hookContext{}, true))
			cancel()
			c.opts.onRevoke(ctx, h.revoke.Partitions)
		}
	default:
		if c.opts.onRevoke != nil {
			ctx, cancel := context.WithTimeout(context.WithValue(c.ctx, hookContext{}, true), c.cfg.RevokeTimeout)
			c.opts.onRevoke(ctx, h.revoke.Partitions)
			cancel()
		}
		c.step(session.HookDone{Now: time.Now(), ID: h.revoke.ID})
	}
}
