// Package refusallog logs refused credentials (admin and sync tokens, the
// gateway's profiling token) so an operator sees a misconfigured gateway
// or a prober, without letting a flood of bad requests flood the log: at
// most Burst lines at once and PerSecond lines a second; lines dropped
// meanwhile are counted and reported (as "suppressed") on the next line.
// A line carries what was refused, why, and where from (route, remote
// address, gateway id) — never the token or any part of it. Safe for
// concurrent use.
package refusallog

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// The default bound: bursts of 10 lines, then one line a second.
const (
	PerSecond = 1
	Burst     = 10
)

// Log is a rate-limited log of refusals.
type Log struct {
	now        func() time.Time
	log        *zap.Logger
	limit      *rate.Limiter
	suppressed atomic.Int64
}

// New logs to log (at warn) within the default bound.
func New(log *zap.Logger) *Log {
	return &Log{now: time.Now, log: log, limit: rate.NewLimiter(PerSecond, Burst)}
}

// Refused logs one refusal of what ("admin token", "sync token", …) for
// reason, with fields that must not hold a secret; beyond the bound it is
// only counted.
func (l *Log) Refused(what, reason string, fields ...zap.Field) {
	if !l.limit.AllowN(l.now(), 1) {
		l.suppressed.Add(1)
		return
	}
	fields = append(fields, zap.String("reason", reason))
	if n := l.suppressed.Swap(0); n > 0 {
		fields = append(fields, zap.Int64("suppressed", n))
	}
	l.log.Warn(what+" refused", fields...)
}
