package gateway

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// forceDebug returns a logger that writes debug entries whatever the
// level of log: the per-capability "lvl":"debug" QoS turns on request
// lines for one capability without turning them on for everyone. It is
// only ever called for such capabilities.
func forceDebug(log *zap.Logger) *zap.Logger {
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return forcedCore{c} }))
}

type forcedCore struct{ zapcore.Core }

func (c forcedCore) Enabled(zapcore.Level) bool { return true }

func (c forcedCore) With(fields []zapcore.Field) zapcore.Core { return forcedCore{c.Core.With(fields)} }

func (c forcedCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}
