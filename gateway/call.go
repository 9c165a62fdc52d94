package gateway

import (
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/ocap"
)

// call is what fetch and produce share about one request: when it started,
// whose capability it carries, the QoS in force, and what it moved.
type call struct {
	g       *Gateway
	ctx     *fasthttp.RequestCtx
	op      string
	start   time.Time
	claims  *ocap.Claims
	qos     ocap.QoS
	req     authz.Request
	bytes   int
	records int
	charged int  // bytes already taken from the budget (a fetch's answer)
	waited  bool // a fetch that long-polled at the broker (its latency is measured apart)
}

// admitCapability checks sync, bearer capability and Decide for req on
// topic, and the capability's byte rate; it returns the bytes the rate
// still allows (or -1 without a rate) and the refusal code.
func (c *call) admitCapability(topic []byte, req authz.Request) (allowance int64, code api.Code) {
	g, now := c.g, c.start
	if code := g.refuseUnsynced(c.ctx, now); code != "" {
		return 0, code
	}
	claims, code := g.capability(c.ctx, now)
	if code != "" {
		return 0, code
	}
	c.claims = claims
	c.qos = g.view.QoS(claims, now)
	if c.req, code = g.authorize(c.ctx, claims, topic, req, now); code != "" {
		return 0, code
	}
	return c.admitRate()
}

// admitRate checks the byte rate of the call's claims (a capability's,
// or a producing client credential's) under its QoS: the bytes the rate
// still allows (-1 without a rate), or the 429 it answered.
func (c *call) admitRate() (allowance int64, code api.Code) {
	if c.qos.MaxBytesPerSec <= 0 {
		return -1, ""
	}
	allowance, wait := c.g.limiter.admit(budgetKey(c.g.view, c.claims, c.start), c.qos.MaxBytesPerSec, c.start)
	if wait > 0 {
		return 0, refuseRate(c.ctx, c.claims, wait, c.start)
	}
	return allowance, ""
}

// finish records the outcome: metrics, the bytes against the capability's
// rate, the monitor tag, and a debug line when the capability's QoS asks.
func (c *call) finish(code api.Code, fields ...zap.Field) {
	elapsed := time.Since(c.start)
	m := c.g.metrics
	m.outcome(c.op, code, elapsed, c.waited)
	if c.claims == nil {
		return
	}
	if code == "" && c.qos.MaxBytesPerSec > 0 && c.bytes > c.charged {
		c.g.limiter.take(budgetKey(c.g.view, c.claims, c.start), c.qos.MaxBytesPerSec, c.bytes-c.charged, time.Now())
	}
	m.monitors.observe(c.qos.Monitor, c.bytes)
	if c.qos.LogLevel == "debug" {
		outcome := string(code)
		if outcome == "" {
			outcome = codeOK
		}
		c.g.trace.Debug(c.op, append(fields, zap.String("jti", c.claims.ID), zap.String("holder", c.claims.Subject),
			zap.String("group", c.claims.Group), zap.String("topic", c.req.Topic), zap.Int32("partition", c.req.Partition),
			zap.Uint64("epoch", c.claims.Epoch), zap.String("outcome", outcome), zap.Int("records", c.records),
			zap.Int("bytes", c.bytes), zap.Time("started", c.start), zap.Duration("elapsed", elapsed))...)
	}
}
