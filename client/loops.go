package client

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/session"
)

// heartbeatLoop keeps one long-poll heartbeat outstanding and steps its
// news; it also performs rejoins. It ends when the consumer stops.
func (c *Consumer) heartbeatLoop() {
	round := 0
	for c.ctx.Err() == nil {
		c.mu.Lock()
		if c.rejoinWanted {
			c.mu.Unlock()
			c.rejoin()
			continue
		}
		member := c.core.Member()
		wait := c.core.HeartbeatWait(time.Now(), c.cfg.HeartbeatWait)
		ctx, cancel := context.WithTimeout(c.ctx, wait+c.cfg.RequestTimeout)
		c.heartbeatCancel = cancel
		c.mu.Unlock()

		var news api.HeartbeatResponse
		err := c.tr.postJSON(ctx, "heartbeat", c.groupURL("heartbeat"), member.Token,
			api.HeartbeatRequest{WaitMs: wait.Milliseconds()}, &news)
		cancel()

		c.mu.Lock()
		c.heartbeatCancel = nil
		var e *Error
		switch {
		case err == nil:
			c.stepLocked(session.NewsArrived{Now: time.Now(), Incarnation: member.Incarnation, News: news})
			c.logNews(news)
		case errors.As(err, &e):
			c.stepLocked(session.HeartbeatFailed{Now: time.Now(), Incarnation: member.Incarnation, Code: e.Code})
		}
		skip := c.rejoinWanted || c.ctx.Err() != nil
		c.mu.Unlock()
		if err == nil || skip {
			round = 0
			continue
		}
		c.log.Warn("heartbeat failed", zap.Error(err))
		_ = c.tr.backoff.wait(c.ctx, round, retryHint(err))
		round++
	}
}

// logNews logs partitions and epochs, never capabilities.
func (c *Consumer) logNews(n api.HeartbeatResponse) {
	if ce := c.log.Check(zap.DebugLevel, "heartbeat news"); ce != nil && len(n.Revoke)+len(n.Grants)+len(n.Renew) > 0 {
		ce.Write(zap.Any("revoke", n.Revoke), zap.Strings("grants", grantNames(n.Grants)), zap.Strings("renew", grantNames(n.Renew)))
	}
}

func grantNames(grants []api.Grant) []string {
	out := make([]string, len(grants))
	for i, g := range grants {
		out[i] = Partition{Topic: g.Topic, Partition: g.Partition}.String()
	}
	return out
}

// rejoin joins again under a new member id (the same instance id) until
// it succeeds, the consumer stops, or the coordinator refuses for good,
// which stops the consumer.
func (c *Consumer) rejoin() {
	for round := 0; c.ctx.Err() == nil; round++ {
		resp, err := c.join(c.ctx)
		if err == nil {
			c.mu.Lock()
			c.rejoinWanted = false
			c.stepLocked(session.Joined{Now: time.Now(), Response: resp})
			c.mu.Unlock()
			c.log.Info("rejoined", zap.String("member", resp.MemberID), zap.Int("grants", len(resp.Grants)))
			return
		}
		if !retriable(err) {
			c.mu.Lock()
			if c.ctx.Err() == nil {
				c.failLocked(err)
			}
			c.mu.Unlock()
			return
		}
		c.log.Warn("rejoin failed", zap.Error(err))
		_ = c.tr.backoff.wait(c.ctx, round, retryHint(err))
	}
}

// timerLoop steps Tick at the session's deadline.
func (c *Consumer) timerLoop() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		c.mu.Lock()
		deadline := c.core.NextDeadline()
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
		case now := <-fire:
			c.step(session.Tick{Now: now})
		}
		timer.Stop()
	}
}

// rearmLocked wakes the timer loop when the session's deadline moved
// earlier than the one it waits for.
func (c *Consumer) rearmLocked() {
	d := c.core.NextDeadline()
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
			ctx, cancel := context.WithCancel(c.ctx)
			cancel()
			c.opts.onRevoke(ctx, h.revoke.Partitions)
		}
	default:
		if c.opts.onRevoke != nil {
			ctx, cancel := context.WithTimeout(c.ctx, c.cfg.RevokeTimeout)
			c.opts.onRevoke(ctx, h.revoke.Partitions)
			cancel()
		}
		c.step(session.HookDone{Now: time.Now(), ID: h.revoke.ID})
	}
}
