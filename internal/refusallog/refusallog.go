// Package refusallog logs refused credentials (admin and sync tokens, the
// gateway's profiling token) so an operator sees a misconfigured gateway
// or a prober, without letting a flood of bad requests flood the log: at
// most Burst lines at once and PerSecond lines a second; lines dropped
// meanwhile are counted and reported (as "suppressed") on the next line.
// NewBounded and LineAt serve other refusals the same way (the Kafka
// listener's commits refused by policy, at info).
// A line carries what was refused, why, and where from (route, remote
// address, gateway id) — never the token or any part of it. Safe for
// concurrent use.
package refusallog

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
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
	level      zapcore.Level
	limit      *rate.Limiter
	suppressed atomic.Int64
}

// New logs to log (at warn) within the default bound.
func New(log *zap.Logger) *Log { return NewBounded(log, zapcore.WarnLevel, PerSecond, Burst) }

// NewBounded logs to log at level, in bursts of burst lines, then
// perSecond lines a second.
func NewBounded(log *zap.Logger, level zapcore.Level, perSecond float64, burst int) *Log {
	return &Log{now: time.Now, log: log, level: level, limit: rate.NewLimiter(rate.Limit(perSecond), burst)}
}

// Refused logs one refusal of what ("admin token", "sync token", …) for
// reason, with fields that must not hold a secret; beyond the bound it is
// only counted.
func (l *Log) Refused(what, reason string, fields ...zap.Field) {
	if l.allow(l.now()) { // before building the line: a flood is only counted
		l.write(what+" refused", append(fields, zap.String("reason", reason)))
	}
}

// LineAt logs msg with fields at now within the bound; beyond it the line
// is only counted, and the next line logged says how many were
// ("suppressed").
func (l *Log) LineAt(now time.Time, msg string, fields ...zap.Field) {
	if l.allow(now) {
		l.write(msg, fields)
	}
}

func (l *Log) allow(now time.Time) bool {
	if !l.limit.AllowN(now, 1) {
		l.suppressed.Add(1)
		return false
	}
	return true
}

func (l *Log) write(msg string, fields []zap.Field) {
	if n := l.suppressed.Swap(0); n > 0 {
		fields = append(fields, zap.Int64("suppressed", n))
	}
	l.log.Log(l.level, msg, fields...)
}
